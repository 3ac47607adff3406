package dispatch_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// keyRun is the stream of one op of the ordering benchmarks: ids drawn
// uniformly from "account-0".."account-(ids-1)".
const keyRun = 1 << 18

func keyStream(ids int) []benchExchange {
	r := rand.New(rand.NewPCG(7, uint64(ids)))
	names := make([]aggregate.ID, ids)
	for i := range names {
		names[i] = aggregate.NewID(benchNamed, "account-"+strconv.Itoa(i))
	}
	xs := make([]benchExchange, keyRun)
	for i := range xs {
		xs[i].id = names[r.IntN(ids)]
	}
	return xs
}

// keyedBenchExchange is benchExchange holding its id as an aggregate.Key
// too: routed by AggregateKey with WithAggregateKey.
type keyedBenchExchange struct {
	benchExchange
	key aggregate.Key
}

func (x keyedBenchExchange) AggregateKey() aggregate.Key { return x.key }

func keyedStream(xs []benchExchange) []keyedBenchExchange {
	keys := map[string]aggregate.Key{}
	ks := make([]keyedBenchExchange, len(xs))
	for i, x := range xs {
		k, ok := keys[x.id.ID]
		if !ok {
			k = aggregate.NewKey(x.id.ID)
			keys[x.id.ID] = k
		}
		ks[i] = keyedBenchExchange{benchExchange: x, key: k}
	}
	return ks
}

// BenchmarkOrdering compares group ordering (the default) with
// WithKeyOrdering on the same stream, routed by AggregateID (route=id) or
// by AggregateKey (route=key, each id hashed once): a no-op handler, 128
// groups, the default scheduler and budget; an op is a whole run of keyRun
// exchanges (the dispatcher's set-up and stop included).
func BenchmarkOrdering(b *testing.B) {
	for _, ids := range []int{1, 1024, 100_000} {
		xs := keyStream(ids)
		ks := keyedStream(xs)
		for _, order := range []string{"group", "key"} {
			b.Run("ids="+strconv.Itoa(ids)+"/order="+order, func(b *testing.B) { benchOrdering(b, xs, order) })
			b.Run("ids="+strconv.Itoa(ids)+"/route=key/order="+order, func(b *testing.B) {
				benchOrdering(b, ks, order, dispatch.WithAggregateKey())
			})
		}
	}
}

func benchOrdering[T aggregate.IDCapable](b *testing.B, xs []T, order string, opts ...dispatch.Option[T]) {
	if order == "key" {
		opts = append(opts, dispatch.WithKeyOrdering())
	}
	opts = append(opts, dispatch.WithParallelism(128))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for b.Loop() {
		d, err := dispatch.New("bench", benchNamed, flux.FromSlice(xs),
			func(context.Context, T) error { return nil }, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&ms1)
	n := float64(b.N) * keyRun
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/exchange")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/exchange")
}

// BenchmarkOrderingBlockedID: WithKeyOrdering, 1,024 ids, a no-op handler,
// 128 groups, the default scheduler (2 goroutines on 2 cores) and budget;
// with blocked=yes the first exchange of account-0 blocks until every other
// id's exchanges were handled. ns/other is the time until then per
// exchange of the other ids; stalled counts the other exchanges not handled
// within a minute (the op fails then).
func BenchmarkOrderingBlockedID(b *testing.B) {
	xs := keyStream(1024)
	blocked := aggregate.NewID(benchNamed, "account-0")
	others := 0
	for _, x := range xs {
		if x.id != blocked {
			others++
		}
	}
	for _, block := range []string{"no", "yes"} {
		b.Run("blocked="+block, func(b *testing.B) {
			var wait time.Duration
			for b.Loop() {
				var done atomic.Int64
				var first atomic.Bool
				othersDone, release := make(chan struct{}), make(chan struct{})
				d, err := dispatch.New("bench", benchNamed, flux.FromSlice(xs),
					func(_ context.Context, x benchExchange) error {
						if x.id != blocked {
							if done.Add(1) == int64(others) {
								close(othersDone)
							}
						} else if block == "yes" && first.CompareAndSwap(false, true) {
							<-release
						}
						return nil
					}, dispatch.WithKeyOrdering(), dispatch.WithParallelism(128))
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := d.Prepare(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := d.Start(); err != nil {
					b.Fatal(err)
				}
				select {
				case <-othersDone:
					wait += time.Since(start)
				case <-time.After(time.Minute):
					b.ReportMetric(float64(int64(others)-done.Load()), "stalled")
					close(release)
					d.ForceStop()
					<-d.Done()
					b.Fatalf("%d of %d other exchanges not handled within a minute", int64(others)-done.Load(), others)
				}
				close(release)
				<-d.Done()
				if err := d.Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(wait.Nanoseconds())/(float64(b.N)*float64(others)), "ns/other")
			b.ReportMetric(0, "stalled")
		})
	}
}
