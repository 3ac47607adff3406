package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// labelsObserver records the labels of every event, by method.
type labelsObserver struct {
	mu   sync.Mutex
	seen map[string]map[dispatch.Labels]int
}

func (o *labelsObserver) add(method string, l dispatch.Labels) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]map[dispatch.Labels]int{}
	}
	if o.seen[method] == nil {
		o.seen[method] = map[dispatch.Labels]int{}
	}
	o.seen[method][l]++
}

func (o *labelsObserver) Admitted(_ context.Context, l dispatch.Labels) { o.add("admitted", l) }
func (o *labelsObserver) Started(_ context.Context, l dispatch.Labels, _ time.Duration) {
	o.add("started", l)
}
func (o *labelsObserver) Finished(_ context.Context, l dispatch.Labels, _ dispatch.Outcome, _ time.Duration, _ error) {
	o.add("finished", l)
}
func (o *labelsObserver) Discarded(_ context.Context, l dispatch.Labels, _ error) {
	o.add("discarded", l)
}

// Each child of a MainDispatcher reports as itself; several observers see
// every event; an exchange of no named aggregate is discarded under the main
// dispatcher's own name.
func TestObserverLabelsPerChild(t *testing.T) {
	sup, _ := countingSupplier(t)
	xs := mixed(90, 5, orders, invoices, payments) // payments has no lanes
	a, b := &labelsObserver{}, &labelsObserver{}
	m := newMain(t, flux.FromSlice(xs), testkit.Perform, sup,
		dispatch.WithObserver(a), dispatch.WithObserver(b))
	require.NoError(t, m.Run(t.Context()))
	ordersL := dispatch.Labels{Dispatcher: "events-Order", Aggregate: orders}
	invoicesL := dispatch.Labels{Dispatcher: "events-Invoice", Aggregate: aggregate.Materialize(invoices)}
	unknownL := dispatch.Labels{Dispatcher: "events"}
	want := map[string]map[dispatch.Labels]int{
		"admitted":  {ordersL: 30, invoicesL: 30},
		"started":   {ordersL: 30, invoicesL: 30},
		"finished":  {ordersL: 30, invoicesL: 30},
		"discarded": {unknownL: 30},
	}
	require.Equal(t, want, a.seen)
	require.Equal(t, want, b.seen)
}

// The outcome hook sees each exchange once with its group, outcome, error
// and times; the handler, the Observer and the hook get the context
// WithContextOf derived, and the handler learns its group.
func TestOutcomeHookAndExchangeContext(t *testing.T) {
	type traceKey struct{}
	const groups = 8
	var mu sync.Mutex
	var results []dispatch.Result[testkit.Exchange]
	var traced, wrongGroup int
	hook := func(ctx context.Context, r dispatch.Result[testkit.Exchange]) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, r)
		if ctx.Value(traceKey{}) == r.Exchange.Seq {
			traced++
		}
	}
	handler := func(ctx context.Context, x testkit.Exchange) error {
		g, ok := dispatch.GroupOf(ctx)
		if !ok || g != x.ID.Mod(groups) {
			mu.Lock()
			wrongGroup++
			mu.Unlock()
		}
		if ctx.Value(traceKey{}) != x.Seq {
			return errors.New("no trace in the handler's ctx")
		}
		return testkit.Perform(ctx, x)
	}
	xs := []testkit.Exchange{
		{ID: aggregate.NewID(orders, "a"), Seq: 0},
		{ID: aggregate.NewID(orders, "b"), Seq: 1, Do: testkit.Fail},
		{ID: aggregate.NewID(orders, "a"), Seq: 2, Do: testkit.Panic},
		{ID: aggregate.NewID(orders, "c"), Seq: 3},
	}
	d := started(t, flux.FromSlice(xs), handler,
		dispatch.WithParallelism(groups),
		dispatch.WithOutcomeHook(hook),
		dispatch.WithContextOf(func(ctx context.Context, x testkit.Exchange) context.Context {
			return context.WithValue(ctx, traceKey{}, x.Seq)
		}))
	<-d.Done()
	require.NoError(t, d.Err())
	require.Zero(t, wrongGroup)
	require.Equal(t, len(xs), traced)
	require.Len(t, results, len(xs))
	bySeq := map[int]dispatch.Result[testkit.Exchange]{}
	for _, r := range results {
		bySeq[r.Exchange.Seq] = r
		require.Equal(t, r.Exchange.ID.Mod(groups), r.Group)
		require.Equal(t, dispatch.Labels{Dispatcher: "orders", Aggregate: orders}, r.Labels)
		require.GreaterOrEqual(t, r.QueueWait, time.Duration(0))
		require.GreaterOrEqual(t, r.Handling, time.Duration(0))
	}
	require.Equal(t, dispatch.OutcomeSuccess, bySeq[0].Outcome)
	require.NoError(t, bySeq[0].Err)
	require.Equal(t, dispatch.OutcomeError, bySeq[1].Outcome)
	require.ErrorIs(t, bySeq[1].Err, testkit.ErrInjected)
	require.Equal(t, dispatch.OutcomePanic, bySeq[2].Outcome)
	var pe *dispatch.PanicError
	require.ErrorAs(t, bySeq[2].Err, &pe)
	_, ok := dispatch.GroupOf(t.Context())
	require.False(t, ok)
}

// A panic of WithContextOf's function fails its exchange as a handler's
// panic does, and the group goes on.
func TestContextOfPanicFailsTheExchange(t *testing.T) {
	var got []dispatch.Outcome
	var mu sync.Mutex
	xs := []testkit.Exchange{{ID: aggregate.NewID(orders, "a"), Seq: 0}, {ID: aggregate.NewID(orders, "a"), Seq: 1}}
	d := started(t, flux.FromSlice(xs), testkit.Perform,
		dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r.Outcome)
		}),
		dispatch.WithContextOf(func(ctx context.Context, x testkit.Exchange) context.Context {
			if x.Seq == 0 {
				panic("no context")
			}
			return ctx
		}))
	<-d.Done()
	require.Equal(t, []dispatch.Outcome{dispatch.OutcomePanic, dispatch.OutcomeSuccess}, got)
	require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, d.Stats())
}

// ForceStop's discards reach the outcome hook with their group, the reason
// and OutcomeDiscarded, and exchanges refused at the intake with group -1.
func TestOutcomeHookSeesForcedDiscards(t *testing.T) {
	block := make(chan struct{})
	var mu sync.Mutex
	var discarded []dispatch.Result[testkit.Exchange]
	d := started(t, nil, func(ctx context.Context, x testkit.Exchange) error {
		if x.Seq == 0 {
			close(block)
			<-ctx.Done()
		}
		return nil
	}, dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
		if r.Outcome == dispatch.OutcomeDiscarded {
			mu.Lock()
			defer mu.Unlock()
			discarded = append(discarded, r)
		}
	}))
	a := aggregate.NewID(orders, "a")
	for i := range 3 {
		require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: a, Seq: i}))
	}
	<-block
	d.ForceStop()
	<-d.Done()
	require.Len(t, discarded, 2)
	for _, r := range discarded {
		require.ErrorIs(t, r.Err, dispatch.ErrForceStopped)
		require.Equal(t, a.Mod(aggregate.DefaultParallelism), r.Group)
	}
	require.Equal(t, dispatch.Stats{Received: 3, Succeeded: 1, Discarded: 2}, d.Stats())
}

// A handler's error is logged at the failure log level (Debug by default),
// with the handler's ctx and the aggregate id; a panic at Error.
func TestFailureLogPolicy(t *testing.T) {
	xs := []testkit.Exchange{
		{ID: aggregate.NewID(orders, "refused"), Seq: 0, Do: testkit.Fail},
		{ID: aggregate.NewID(orders, "broken"), Seq: 1, Do: testkit.Panic},
	}
	levels := func(opts ...dispatch.Option[testkit.Exchange]) (*recordingHandler, []slog.Level) {
		h := &recordingHandler{}
		d := started(t, flux.FromSlice(xs), testkit.Perform, append(opts,
			dispatch.WithLogger(slog.New(h)),
			dispatch.WithContextOf(func(ctx context.Context, x testkit.Exchange) context.Context {
				return context.WithValue(ctx, logTraceKey{}, x.ID.ID)
			}))...)
		<-d.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		byID := map[string]slog.Level{}
		for i, r := range h.records {
			if r.Message != "dispatch: exchange failed" {
				continue
			}
			var id string
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "aggregate_id" {
					id = a.Value.String()
				}
				return true
			})
			require.Equal(t, id, h.traces[i], "logged with the handler's ctx")
			byID[id] = r.Level
		}
		return h, []slog.Level{byID["refused"], byID["broken"]}
	}
	_, got := levels()
	require.Equal(t, []slog.Level{dispatch.DefaultFailureLogLevel, slog.LevelError}, got)
	_, got = levels(dispatch.WithFailureLogLevel(slog.LevelWarn))
	require.Equal(t, []slog.Level{slog.LevelWarn, slog.LevelError}, got)

	// At the default logger's level, a run with routine refusals prints nothing.
	var buf bytes.Buffer
	refusals := make([]testkit.Exchange, 100)
	for i := range refusals {
		refusals[i] = testkit.Exchange{ID: aggregate.NewID(orders, "x"), Seq: i, Do: testkit.Fail}
	}
	d := started(t, flux.FromSlice(refusals), testkit.Perform,
		dispatch.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	<-d.Done()
	require.Equal(t, int64(100), d.Stats().Failed)
	require.Empty(t, strings.TrimSpace(buf.String()))
}

// A panicking outcome hook is logged once and breaks no accounting.
func TestOutcomeHookPanicIsContained(t *testing.T) {
	h := &recordingHandler{}
	xs := make([]testkit.Exchange, 50)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: i}
	}
	d := started(t, flux.FromSlice(xs), testkit.Perform,
		dispatch.WithLogger(slog.New(h)),
		dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[testkit.Exchange]) { panic("hook") }))
	<-d.Done()
	require.Equal(t, dispatch.Stats{Received: 50, Succeeded: 50}, d.Stats())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.records, 1)
	require.Equal(t, "dispatch: hook panicked", h.records[0].Message)
}

// Invalid hooks are refused at construction.
func TestOutcomeOptionsRefuseNil(t *testing.T) {
	for _, opt := range []dispatch.Option[testkit.Exchange]{
		dispatch.WithOutcomeHook[testkit.Exchange](nil),
		dispatch.WithContextOf[testkit.Exchange](nil),
		dispatch.WithObserver(nil),
	} {
		_, err := dispatch.New("orders", orders, flux.Empty[testkit.Exchange](), testkit.Perform, opt)
		require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	}
}

// goexitOnFinished is an Observer whose Finished ends its goroutine with
// runtime.Goexit, as a test observer calling t.FailNow would.
type goexitOnFinished struct{ *countingObserver }

func (o goexitOnFinished) Finished(ctx context.Context, l dispatch.Labels, out dispatch.Outcome, h time.Duration, err error) {
	o.countingObserver.Finished(ctx, l, out, h, err)
	runtime.Goexit()
}

// hookCounts counts the calls of the outcome and discard hooks.
type hookCounts struct{ outcomes, discards atomic.Int64 }

func (c *hookCounts) options() []dispatch.Option[int] {
	return []dispatch.Option[int]{
		dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[int]) { c.outcomes.Add(1) }),
		dispatch.WithDiscardHook(func(int, error) { c.discards.Add(1) }),
	}
}

// WithOutcomeHook promises a call per exchange received, drops by ForceStop
// included, and the Observer's doc that an exchange is accounted for as if a
// method that ended its goroutine had returned. An Observer whose Discarded
// calls runtime.Goexit must not cost the discarded exchanges their outcome
// and discard hooks: the outcome hook is the seam where a broker source
// learns what ended.
func TestObserverGoexitOnDiscardedKeepsTheHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hooks hookCounts
		xs := make([]int, 10)
		for i := range xs {
			xs[i] = i
		}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 2 }, func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return ctx.Err()
		}, append(hooks.options(), dispatch.WithParallelism(2),
			dispatch.WithObserver(goexitOnDiscarded{&countingObserver{}}))...)
		synctest.Wait() // one handler per lane blocked, the rest queued
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		require.Equal(t, int64(len(xs)), s.Received)
		require.Positive(t, s.Discarded)
		assert.Equal(t, s.Received, hooks.outcomes.Load(), "the outcome hook once per exchange received")
		assert.Equal(t, s.Discarded, hooks.discards.Load(), "the discard hook once per exchange dropped")
	})
}

// The same for a handled exchange: an Observer whose Finished calls
// runtime.Goexit must not cost the exchange its outcome hook.
func TestObserverGoexitOnFinishedKeepsTheOutcomeHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hooks hookCounts
		xs := []int{0, 1, 2, 3, 4, 5}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 2 }, func(context.Context, int) error { return nil },
			append(hooks.options(), dispatch.WithParallelism(2),
				dispatch.WithObserver(goexitOnFinished{&countingObserver{}}))...)
		<-d.Done()
		s := d.Stats()
		require.Equal(t, int64(len(xs)), s.Received)
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.Equal(t, s.Received, hooks.outcomes.Load(), "the outcome hook once per exchange received")
	})
}

// WithOutcomeHook: "Given more than once, every hook is called, in order."
// A first hook that calls runtime.Goexit must not cost the second one its
// call, for a handled exchange as for a dropped one.
func TestOutcomeHookGoexitKeepsTheNextHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var second atomic.Int64
		xs := make([]int, 10)
		for i := range xs {
			xs[i] = i
		}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 2 }, func(ctx context.Context, i int) error {
			if i >= 2 {
				<-ctx.Done() // the first exchange of each lane ends; the next blocks
			}
			return ctx.Err()
		}, dispatch.WithParallelism(2),
			dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[int]) { runtime.Goexit() }),
			dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[int]) { second.Add(1) }))
		synctest.Wait() // 0 and 1 handled, 2 and 3 blocked, the rest queued
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		require.Equal(t, int64(len(xs)), s.Received)
		assert.Equal(t, s.Received, second.Load(), "the second hook once per exchange received")
	})
}

// hookTrail records, per exchange, which hooks were called, in order.
type hookTrail struct {
	mu    sync.Mutex
	calls map[int][]string
}

func (h *hookTrail) add(x int, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[int][]string{}
	}
	h.calls[x] = append(h.calls[x], name)
}

// One chain of hooks with a panicking one and a Goexiting one among them,
// after an Observer that Goexits too, for handled exchanges (success, error,
// a handler's panic, a handler's Goexit) and dropped ones: every hook is
// called once per exchange, in order, and the dispatcher accounts for every
// exchange and reaches Done.
func TestHookChainWithPanicAndGoexitCallsEachHookOnceInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trail hookTrail
		var dropped sync.Map
		const n = 40
		xs := make([]int, n)
		for i := range xs {
			xs[i] = i
		}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 4 }, func(ctx context.Context, i int) error {
			switch {
			case i >= 20:
				<-ctx.Done() // the rest queued behind, dropped by the force
				return ctx.Err()
			case i%4 == 1:
				return errors.New("refused")
			case i%4 == 2:
				panic("handler")
			case i%4 == 3:
				runtime.Goexit()
			}
			return nil
		},
			dispatch.WithParallelism(4),
			dispatch.WithObserver(goexitOnFinished{&countingObserver{}}),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) { trail.add(r.Exchange, "o1"); panic("o1") }),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) { trail.add(r.Exchange, "o2"); runtime.Goexit() }),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) {
				trail.add(r.Exchange, "o3")
				if r.Outcome == dispatch.OutcomeDiscarded {
					dropped.Store(r.Exchange, true)
				}
			}),
			dispatch.WithDiscardHook(func(x int, _ error) { trail.add(x, "d1"); runtime.Goexit() }),
			dispatch.WithDiscardHook(func(x int, _ error) { trail.add(x, "d2"); panic("d2") }),
			dispatch.WithDiscardHook(func(x int, reason error) {
				assert.ErrorIs(t, reason, dispatch.ErrForceStopped)
				trail.add(x, "d3")
			}),
		)
		synctest.Wait() // the lanes' heads from 20 on blocked, the rest queued
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		require.Equal(t, int64(n), s.Received)
		assert.Zero(t, s.InFlight)
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.Positive(t, s.Discarded)
		var ndropped int64
		dropped.Range(func(any, any) bool { ndropped++; return true })
		assert.Equal(t, s.Discarded, ndropped)
		trail.mu.Lock()
		defer trail.mu.Unlock()
		for i := range n {
			want := []string{"o1", "o2", "o3"}
			if _, ok := dropped.Load(i); ok {
				want = append(want, "d1", "d2", "d3")
			}
			assert.Equal(t, want, trail.calls[i], "exchange %d", i)
		}
	})
}

var edgeContextOfNamed = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Ledger"}

// nilCtxObserver counts the calls that got a nil ctx.
type nilCtxObserver struct{ nils atomic.Int64 }

func (o *nilCtxObserver) see(ctx context.Context) {
	if ctx == nil {
		o.nils.Add(1)
	}
}

func (o *nilCtxObserver) Admitted(ctx context.Context, _ dispatch.Labels) { o.see(ctx) }

func (o *nilCtxObserver) Started(ctx context.Context, _ dispatch.Labels, _ time.Duration) {
	o.see(ctx)
}

func (o *nilCtxObserver) Finished(ctx context.Context, _ dispatch.Labels, _ dispatch.Outcome, _ time.Duration, _ error) {
	o.see(ctx)
}

func (o *nilCtxObserver) Discarded(ctx context.Context, _ dispatch.Labels, _ error) { o.see(ctx) }

// A WithContextOf function that returns nil breaks its own promise; the
// exchange must fail alone (as a panic of that function), its handler must
// not run with a nil ctx, and its Result must reach the Results reader like
// every other: read + Dropped == Received. It used to pass nil on to the
// handler, the Observer and the outcome hooks, where the Results hook
// panicked on it and lost the Result without counting it.
func TestContextOfReturningNilFailsTheExchangeAlone(t *testing.T) {
	r, err := dispatch.NewResults[int](0)
	require.NoError(t, err)
	obs := &nilCtxObserver{}
	var nilHandled atomic.Int64
	d, err := dispatch.NewKeyed("ledger", edgeContextOfNamed, flux.FromSlice([]int{1, 2, 3, 4}),
		func(int) int { return 0 },
		func(ctx context.Context, x int) error {
			if ctx == nil {
				nilHandled.Add(1)
			}
			return nil
		},
		quietOf[int](), dispatch.WithParallelism(1), dispatch.WithResults(r), dispatch.WithObserver(obs),
		dispatch.WithContextOf(func(ctx context.Context, x int) context.Context {
			if x == 2 {
				return nil // the misuse under test
			}
			return ctx
		}))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	var got []dispatch.Result[int]
	for res, err := range r.All(t.Context()) {
		require.NoError(t, err)
		got = append(got, res)
	}
	<-d.Done()
	require.Zero(t, nilHandled.Load(), "no handler call with a nil ctx")
	require.Zero(t, obs.nils.Load(), "no Observer call with a nil ctx")
	require.Zero(t, r.Dropped())
	require.Len(t, got, 4, "one Result per exchange")
	require.Equal(t, []int{1, 2, 3, 4}, []int{got[0].Exchange, got[1].Exchange, got[2].Exchange, got[3].Exchange})
	require.Equal(t, dispatch.OutcomePanic, got[1].Outcome)
	var pe *dispatch.PanicError
	require.True(t, errors.As(got[1].Err, &pe), "%v", got[1].Err)
	require.ErrorContains(t, got[1].Err, "nil context")
	require.Equal(t, dispatch.Stats{Received: 4, Succeeded: 3, Failed: 1}, d.Stats())
}
