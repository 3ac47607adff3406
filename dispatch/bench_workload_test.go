package dispatch_test

import (
	"bufio"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/aggregate"
)

// benchBatch is the number of exchanges one benchmark op pushes and waits for:
// large enough that the per-op wake-up is noise, so ns/op / benchBatch is the
// steady-state cost of one exchange.
const benchBatch = 1024

var benchNamed = aggregate.MaterializedNamedAggregate{Context: "bench", Aggregate: "Account"}

// benchExchange is what every implementation under comparison carries: an
// aggregate id and the time it entered the pipeline.
type benchExchange struct {
	id   aggregate.ID
	sent time.Time
}

func (x benchExchange) AggregateID() aggregate.ID { return x.id }

// workload is a fixed sequence of aggregate ids, replayed cyclically.
type workload struct {
	name string
	ids  []aggregate.ID
}

func uniformWorkload(keys int) workload {
	r := rand.New(rand.NewPCG(1, uint64(keys)))
	ids := make([]aggregate.ID, 1<<16)
	for i := range ids {
		ids[i] = aggregate.NewID(benchNamed, "account-"+strconv.Itoa(r.IntN(keys)))
	}
	name := fmt.Sprintf("keys=%d", keys)
	if keys == 1 {
		name = "keys=hot"
	}
	return workload{name: name, ids: ids}
}

// flightsWorkload draws airports with the frequencies of the flights sample.
func flightsWorkload(tb testing.TB) workload {
	f, err := os.Open("testdata/flights-origins.txt")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var pool []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		code, count, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			tb.Fatalf("testdata/flights-origins.txt: bad line %q", sc.Text())
		}
		for range n {
			pool = append(pool, code)
		}
	}
	r := rand.New(rand.NewPCG(2, 3))
	ids := make([]aggregate.ID, 1<<16)
	for i := range ids {
		ids[i] = aggregate.NewID(benchNamed, pool[r.IntN(len(pool))])
	}
	return workload{name: "keys=flights", ids: ids}
}

// spin burns about d of CPU without sleeping: the "cpu" handler cost.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// latencies is a lock-free log-linear histogram of durations (4 sub-buckets per
// power of two, so quantiles are within 25%).
type latencies [256]atomic.Int64

func (h *latencies) record(d time.Duration) {
	n := uint64(max(d, 1))
	e := bits.Len64(n) - 1
	sub := 0
	if e >= 2 {
		sub = int(n>>(e-2)) & 3
	}
	h[e*4+sub].Add(1)
}

func (h *latencies) quantile(q float64) time.Duration {
	var total int64
	for i := range h {
		total += h[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := int64(q * float64(total))
	for i := range h {
		if rank -= h[i].Load(); rank < 0 {
			e, sub := i/4, i%4
			if e < 2 {
				return time.Duration(1 << e)
			}
			return time.Duration(uint64(4+sub) << (e - 2))
		}
	}
	return 0
}

// benchRun is one implementation running one workload: push hands an exchange
// to the implementation, stop shuts it down and waits for its goroutines.
type benchRun struct {
	push func(benchExchange)
	stop func()
}

// benchHandler counts completions of the current batch and records the time
// from entering the pipeline to the handler's start.
type benchHandler struct {
	cost      time.Duration
	remaining atomic.Int64
	batchDone chan struct{}
	latency   latencies
}

func newBenchHandler(cost time.Duration) *benchHandler {
	return &benchHandler{cost: cost, batchDone: make(chan struct{}, 1)}
}

func (h *benchHandler) handle(x benchExchange) {
	h.latency.record(time.Since(x.sent))
	if h.cost > 0 {
		spin(h.cost)
	}
	if h.remaining.Add(-1) == 0 {
		h.batchDone <- struct{}{}
	}
}

// measure pushes benchBatch exchanges per op through run and waits for the
// handler to see all of them; it reports per-exchange cost and latency.
func measure(b *testing.B, w workload, h *benchHandler, run benchRun) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	next := 0
	for b.Loop() {
		h.remaining.Store(benchBatch)
		for range benchBatch {
			run.push(benchExchange{id: w.ids[next], sent: time.Now()})
			next = (next + 1) % len(w.ids)
		}
		<-h.batchDone
	}
	runtime.ReadMemStats(&after)
	run.stop()
	exchanges := float64(b.N * benchBatch)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/exchanges, "ns/exchange")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/exchanges, "allocs/exchange")
	b.ReportMetric(float64(h.latency.quantile(0.50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(h.latency.quantile(0.99).Nanoseconds()), "p99-ns")
}
