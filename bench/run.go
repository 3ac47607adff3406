package bench

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// Impl is one implementation under test. Run streams r's exchanges from the
// calling goroutine (or from a source goroutine the implementation owns),
// has every one handled through r.Handle, and returns once all are handled
// and every goroutine it started has exited, with the number it handled.
type Impl struct {
	Name string
	What string // one line for the report
	Run  func(r *Run) (handled int64, err error)
}

// Impls are the in-process implementations, in report order. Reactor runs
// out of process (see Reactor).
var Impls = []Impl{inlineImpl, spscImpl, shardedImpl, rxgoImpl, aggflowImpl, aggflowIDImpl, aggflowBatchImpl, aggflowRxgoImpl}

// LookupImpl returns the in-process implementation named name.
func LookupImpl(name string) (Impl, bool) {
	i := slices.IndexFunc(Impls, func(im Impl) bool { return im.Name == name })
	if i < 0 {
		return Impl{}, false
	}
	return Impls[i], true
}

// RunOptions are the modes of one run.
type RunOptions struct {
	// Verify checks, in the handler, that each id's sequence numbers arrive
	// as 1, 2, 3, ... (order, no loss, no duplicate) and, at the end, that
	// each id reached the count produced. It costs a random memory access
	// per exchange, so timed runs leave it off.
	Verify bool
	// Rate, when positive, paces the producer at Rate exchanges per second
	// and records each exchange's wait from send to handler start.
	Rate float64
}

// Run is one pass of a workload through one implementation. It is used once.
type Run struct {
	Cell
	N int

	w        *Workload
	produced []int32 // per id: how many were produced (the last Seq)
	check    []int32 // per id: the last Seq handled, when verifying
	bad      atomic.Int64
	waits    []int64 // per exchange: ns from send to handler start, when paced
	interval float64 // ns between sends, when paced
	base     time.Time
	sent     atomic.Int64 // ns since base at which the producer finished
}

// NewRun prepares the first n exchanges of w for one pass over cell c.
func NewRun(c Cell, w *Workload, n int, o RunOptions) *Run {
	if n > len(w.Seq) {
		panic(fmt.Sprintf("bench: run of %d exchanges on a workload of %d", n, len(w.Seq)))
	}
	r := &Run{Cell: c, N: n, w: w, produced: make([]int32, len(w.Keys)), base: time.Now()}
	if o.Verify {
		r.check = make([]int32, len(w.Keys))
	}
	if o.Rate > 0 {
		r.interval = 1e9 / o.Rate
		r.waits = make([]int64, n)
	}
	return r
}

// errStopped is returned by Produce when emit refused an exchange.
var errStopped = errors.New("bench: the implementation refused an exchange")

// Produce streams the run's exchanges to emit, in order, on the calling
// goroutine, as fast as emit takes them or at the paced rate. emit returns
// false to refuse (the run then fails).
func (r *Run) Produce(emit func(Exchange) bool) error {
	keys := r.w.Keys
	for i, idx := range r.w.Seq[:r.N] {
		r.produced[idx]++
		x := Exchange{Key: keys[idx], Idx: idx, Seq: r.produced[idx], Num: int32(i)}
		if r.interval > 0 {
			x.Sent = r.pace(i)
		}
		if !emit(x) {
			return fmt.Errorf("%w: number %d of %d", errStopped, i, r.N)
		}
	}
	r.sent.Store(r.now())
	return nil
}

func (r *Run) now() int64 { return int64(time.Since(r.base)) }

// pace waits until exchange i is due (i x interval after the start) and
// returns the send time. Far from the due time it sleeps; close to it, it
// yields, so that a consumer sharing its thread can run. An exchange that
// is late (the implementation pushed back) is sent at once: the wait
// recorded starts at the actual send, and the achieved rate tells how far
// behind the producer fell.
func (r *Run) pace(i int) int64 {
	due := int64(float64(i) * r.interval)
	for {
		now := r.now()
		switch d := due - now; {
		case d <= 0:
			return now
		case d > 2*int64(time.Millisecond):
			time.Sleep(time.Duration(d) - time.Millisecond)
		default:
			runtime.Gosched()
		}
	}
}

// Handle is the handler every implementation calls once per exchange: it
// records the wait (paced runs), checks order (verifying runs), then does
// the cell's work. It takes the exchange by value, as a dispatcher's
// handler gets it, so that a handler passes it on in registers rather than
// storing it to take its address.
func (r *Run) Handle(x Exchange) {
	if r.waits != nil {
		r.waits[x.Num] = r.now() - x.Sent
	}
	if r.check != nil {
		if x.Seq != r.check[x.Idx]+1 {
			r.bad.Add(1)
		}
		r.check[x.Idx] = x.Seq
	}
	switch r.Handler {
	case Spin1us:
		spin(time.Microsecond)
	case Sleep50us:
		blockThread(50 * time.Microsecond)
	case GoSleep50us:
		time.Sleep(50 * time.Microsecond)
	}
}

func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// Verify returns an error when handled is not the number of exchanges
// produced or, when the run verifies, when some id's exchanges were not
// handled exactly once each, in production order.
func (r *Run) Verify(handled int64) error {
	if handled != int64(r.N) {
		return fmt.Errorf("bench: %d exchanges handled, %d produced", handled, r.N)
	}
	if r.check == nil {
		return nil
	}
	if b := r.bad.Load(); b > 0 {
		return fmt.Errorf("bench: %d exchanges out of order, lost or repeated within their id", b)
	}
	for i, want := range r.produced {
		if got := r.check[i]; got != want {
			return fmt.Errorf("bench: id %q: last sequence number handled %d, produced %d", r.w.Keys[i].ID(), got, want)
		}
	}
	return nil
}

// Latency is the distribution of the waits from send to handler start.
type Latency struct {
	P50, P90, P99, P999 float64 // ns
	Achieved            float64 // exchanges per second the producer managed
}

func (r *Run) latency() Latency {
	w := slices.Clone(r.waits)
	slices.Sort(w)
	q := func(p float64) float64 { return float64(w[min(len(w)-1, int(p*float64(len(w))))]) }
	l := Latency{P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999)}
	if s := r.sent.Load(); s > 0 {
		l.Achieved = float64(r.N) / (float64(s) / 1e9)
	}
	return l
}
