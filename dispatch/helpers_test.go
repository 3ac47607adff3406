package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// countingSource emits next(0), next(1), ... (n of them, or forever when n <
// 0) and counts what it handed over and whether it was subscribed.
type countingSource struct {
	pulled     atomic.Int64
	subscribed atomic.Bool
}

func (c *countingSource) flux(n int, next func(i int) testkit.Exchange) flux.Flux[testkit.Exchange] {
	return flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
		c.subscribed.Store(true)
		for i := 0; n < 0 || i < n; i++ {
			if err := sink.Next(next(i)); err != nil {
				return err
			}
		}
		return nil
	}).DoOnNext(func(testkit.Exchange) {
		// Counted as it is handed downstream, before the router may block
		// on it: an exchange the consumer refuses was still handed over.
		c.pulled.Add(1)
	})
}

// countingObserver counts every Observer call.
type countingObserver struct {
	admitted, started, discarded atomic.Int64
	finished                     [5]atomic.Int64 // by Outcome

	mu      sync.Mutex
	errs    []error
	reasons []error
}

func (o *countingObserver) Admitted(context.Context, dispatch.Labels) { o.admitted.Add(1) }
func (o *countingObserver) Started(context.Context, dispatch.Labels, time.Duration) {
	o.started.Add(1)
}

func (o *countingObserver) Finished(ctx context.Context, l dispatch.Labels, out dispatch.Outcome, _ time.Duration, err error) {
	o.finished[out].Add(1)
	if err != nil {
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
	}
}

func (o *countingObserver) Discarded(ctx context.Context, l dispatch.Labels, reason error) {
	o.discarded.Add(1)
	o.mu.Lock()
	o.reasons = append(o.reasons, reason)
	o.mu.Unlock()
}

func (o *countingObserver) finishedTotal() int64 {
	var n int64
	for i := range o.finished {
		n += o.finished[i].Load()
	}
	return n
}

// every reports whether pred holds for all errs.
func every(errs []error, target error) bool {
	for _, err := range errs {
		if !errors.Is(err, target) {
			return false
		}
	}
	return true
}

// discardLogger drops every record: the logger of tests that do not look at
// the logs.
var discardLogger = slog.New(slog.DiscardHandler)

// quiet is the option that silences a dispatcher of testkit.Exchange.
var quiet = dispatch.WithLogger(discardLogger)

// quietOf silences a dispatcher of any exchange type.
func quietOf[T any]() dispatch.Option[T] { return dispatch.WithLogger(discardLogger) }

// started returns a dispatcher routed by aggregate id that is prepared and
// started. A nil source makes it push-mode (Emit).
func started[T aggregate.IDCapable](t testing.TB, source dispatch.Source[T], h dispatch.Handler[T], opts ...dispatch.Option[T]) *dispatch.Dispatcher[T] {
	t.Helper()
	d, err := dispatch.New("orders", orders, source, h, append([]dispatch.Option[T]{quietOf[T]()}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	forceOnCleanup(t, d)
	return d
}

// forceOnCleanup force-stops c at the end of the test and waits for it, so
// that a test failing half-way leaves no goroutine behind (a no-op for a
// component that ended). Registered after the scheduler a test passes to
// c, it runs before that scheduler's disposal.
func forceOnCleanup(t testing.TB, c interface {
	ForceStop()
	Done() <-chan struct{}
}) {
	t.Cleanup(func() {
		c.ForceStop()
		<-c.Done()
	})
}

// startedKeyed is started for a dispatcher routed by a key function.
func startedKeyed[T any](t testing.TB, source dispatch.Source[T], key func(T) int, h dispatch.Handler[T], opts ...dispatch.Option[T]) *dispatch.Dispatcher[T] {
	t.Helper()
	d, err := dispatch.NewKeyed("orders", orders, source, key, h, append([]dispatch.Option[T]{quietOf[T]()}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	forceOnCleanup(t, d)
	return d
}

// counted returns src counting what it emits, for testkit.NoLoss.
func counted[T any](src flux.Flux[T]) (flux.Flux[T], *atomic.Int64) {
	var n atomic.Int64
	return src.DoOnNext(func(T) { n.Add(1) }), &n
}

// panicOnMsg is a log handler that panics on records with message msg.
type panicOnMsg struct{ msg string }

func (l panicOnMsg) Enabled(context.Context, slog.Level) bool { return true }
func (l panicOnMsg) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l panicOnMsg) WithGroup(string) slog.Handler            { return l }

func (l panicOnMsg) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		panic("log handler: " + r.Message)
	}
	return nil
}

// edgeStop stops d gracefully within a minute (of virtual time under
// synctest) and returns its Stats then; a stop that did not end in time is
// forced, and its error returned.
func edgeStop[T any](t *testing.T, d *dispatch.Dispatcher[T]) (dispatch.Stats, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := d.StopGracefully(ctx)
	st := d.Stats()
	if err != nil {
		d.ForceStop()
	}
	return st, err
}

// edgeLedger records every handler call and every discard, per aggregate id.
type edgeLedger struct {
	mu        sync.Mutex
	handled   map[string][]int
	discarded map[string][]int
	hook      atomic.Int64
	calls     atomic.Int64
}

func newBrkLedger() *edgeLedger {
	return &edgeLedger{handled: map[string][]int{}, discarded: map[string][]int{}}
}

func (l *edgeLedger) handle(x testkit.Exchange) {
	l.calls.Add(1)
	l.mu.Lock()
	l.handled[x.ID.ID] = append(l.handled[x.ID.ID], x.Seq)
	l.mu.Unlock()
}

func (l *edgeLedger) discard(x testkit.Exchange, _ error) {
	l.hook.Add(1)
	l.mu.Lock()
	l.discarded[x.ID.ID] = append(l.discarded[x.ID.ID], x.Seq)
	l.mu.Unlock()
}

// check verifies, once the dispatcher is done: the Stats identity, InFlight
// 0, one hook call per discard, per id: handled in order, each exchange
// handled or discarded exactly once, the union a prefix of the id's
// sequence, and nothing handled after something of the same id was
// discarded.
func (l *edgeLedger) check(s dispatch.Stats, obs *countingObserver) error {
	var errs []error
	if s.Received != s.Succeeded+s.Failed+s.Discarded+s.InFlight || s.InFlight != 0 {
		errs = append(errs, fmt.Errorf("stats %+v after Done", s))
	}
	if l.hook.Load() != s.Discarded {
		errs = append(errs, fmt.Errorf("discard hook called %d times, Discarded %d", l.hook.Load(), s.Discarded))
	}
	if obs != nil && obs.discarded.Load() != s.Discarded {
		errs = append(errs, fmt.Errorf("Observer.Discarded called %d times, Discarded %d", obs.discarded.Load(), s.Discarded))
	}
	if obs != nil && obs.finishedTotal() != s.Succeeded+s.Failed {
		errs = append(errs, fmt.Errorf("Observer.Finished called %d times, Succeeded+Failed %d", obs.finishedTotal(), s.Succeeded+s.Failed))
	}
	if l.calls.Load() != s.Succeeded+s.Failed {
		errs = append(errs, fmt.Errorf("handler called %d times, Succeeded+Failed %d", l.calls.Load(), s.Succeeded+s.Failed))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var total int64
	ids := map[string]bool{}
	for id := range l.handled {
		ids[id] = true
	}
	for id := range l.discarded {
		ids[id] = true
	}
	for id := range ids {
		h, dsc := l.handled[id], l.discarded[id]
		for i := 1; i < len(h); i++ {
			if h[i] <= h[i-1] {
				errs = append(errs, fmt.Errorf("id %s handled out of order: %v", id, h))
				break
			}
		}
		seen := map[int]int{}
		for _, q := range h {
			seen[q]++
		}
		for _, q := range dsc {
			seen[q]++
		}
		for q := range len(h) + len(dsc) {
			if seen[q] != 1 {
				errs = append(errs, fmt.Errorf("id %s: seq %d seen %d times (handled %v, discarded %v)", id, q, seen[q], h, dsc))
				break
			}
		}
		if len(dsc) > 0 && len(h) > 0 {
			minD := dsc[0]
			for _, q := range dsc {
				minD = min(minD, q)
			}
			if h[len(h)-1] > minD {
				errs = append(errs, fmt.Errorf("id %s: seq %d handled after seq %d was discarded", id, h[len(h)-1], minD))
			}
		}
		total += int64(len(h) + len(dsc))
	}
	if total != s.Received {
		errs = append(errs, fmt.Errorf("ledger holds %d exchanges, Received %d", total, s.Received))
	}
	return errors.Join(errs...)
}
