package dispatch_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
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
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// One slow aggregate holds part of the pending budget, never the other
// groups: while fewer than the budget are pending, the exchanges of the
// other ids are handled at once. Here the slow id has more exchanges queued
// (40) than the earlier per-group buffer held (32), where the router then
// waited on the slow group's full queue and every other group stalled.
func TestSlowAggregateDoesNotStallTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow, others, budget = 40, 400, 64
		const p = 64
		slowID := aggregate.NewID(orders, "slow")
		var fast []aggregate.ID // 13 ids, none in the slow id's group
		for k := 0; len(fast) < 13; k++ {
			if id := aggregate.NewID(orders, "fast-"+strconv.Itoa(k)); id.Mod(p) != slowID.Mod(p) {
				fast = append(fast, id)
			}
		}
		var xs []testkit.Exchange
		for i := range slow + others {
			if i%11 == 0 && i/11 < slow {
				xs = append(xs, testkit.Exchange{ID: slowID, Seq: i / 11, Do: testkit.Delay, Delay: time.Hour})
				continue
			}
			xs = append(xs, testkit.Exchange{ID: fast[i%len(fast)], Seq: i})
		}
		require.Len(t, xs, slow+others)
		start := time.Now()
		var fastDone atomic.Int64
		var lastFast time.Duration
		d := started(t, flux.FromSlice(xs), func(ctx context.Context, x testkit.Exchange) error {
			err := testkit.Perform(ctx, x)
			if x.ID != slowID && fastDone.Add(1) == others {
				lastFast = time.Since(start)
			}
			return err
		}, dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
			dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait() // the slow handler sleeps; everything else that could run has run
		assert.EqualValues(t, others, fastDone.Load(), "every other exchange was handled while the slow one sleeps")
		assert.Zero(t, lastFast, "without waiting for the slow aggregate")
		s := d.Stats()
		assert.Equal(t, int64(slow+others), s.Received, "the source was read to its end")
		assert.Equal(t, int64(slow), s.InFlight, "only the slow aggregate's exchanges are pending")
		<-d.Done()
		assert.Equal(t, time.Duration(slow)*time.Hour, time.Since(start), "the slow aggregate took its time, serially")
		assert.Equal(t, dispatch.Stats{Received: slow + others, Succeeded: slow + others}, d.Stats())
	})
}

// Once the slow aggregate holds the whole budget, the intake waits: the
// budget is the one memory bound, shared by every group.
func TestSlowAggregateHoldingTheBudgetHoldsTheIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget = 8
		src := &countingSource{}
		slowID := aggregate.NewID(orders, "slow")
		d := started(t, src.flux(-1, func(i int) testkit.Exchange {
			if i < budget {
				return testkit.Exchange{ID: slowID, Seq: i, Do: testkit.Block}
			}
			return testkit.Exchange{ID: aggregate.NewID(orders, "fast"), Seq: i - budget}
		}), testkit.Perform, dispatch.WithMaxPending(budget),
			dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait()
		assert.Equal(t, dispatch.Stats{Received: budget, InFlight: budget}, d.Stats(),
			"the slow id's exchanges; the one the intake holds while it waits for room is received once admitted or refused")
		d.ForceStop()
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: budget + 1, Failed: 1, Discarded: budget}, d.Stats())
	})
}

// A running dispatcher costs the scheduler's goroutines and its one intake
// goroutine, whatever the number of groups and ids: none per group, none per
// id, none per exchange.
func TestNoGoroutinePerGroup(t *testing.T) {
	const groups, ids, pool = 20_000, 5_000, 4
	sched := newParallel(t, pool)
	baseline := runtime.NumGoroutine()
	xs := make([]testkit.Exchange, ids)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "id-"+strconv.Itoa(i))}
	}
	handled := make(chan struct{})
	var n atomic.Int64
	release := make(chan struct{})
	// The source emits every id once, then waits, as an idle broker does.
	src := flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
		for _, x := range xs {
			if err := sink.Next(x); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil
	})
	d := started(t, src, func(context.Context, testkit.Exchange) error {
		if n.Add(1) == ids {
			close(handled)
		}
		return nil
	}, dispatch.WithParallelism(groups), dispatch.WithScheduler(sched))
	<-handled
	got := runtime.NumGoroutine()
	assert.LessOrEqual(t, got, baseline+pool+2, "goroutines: %d before, %d with %d groups and %d idle ids", baseline, got, groups, ids)
	close(release)
	<-d.Done()
	assert.Equal(t, dispatch.Stats{Received: ids, Succeeded: ids}, d.Stats())
}

// A scheduler its owner disposes by force before any task of the dispatcher
// ran (here every goroutine of it was busy) drops the dispatcher's queued
// lane tasks. The exchanges in those lanes must still end (discarded with
// schedulers.ErrRejected), and the dispatcher with them, without a force of
// its own.
func TestSchedulerDisposedBeforeAnyLaneRanEndsTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("busy", 1)
		require.NoError(t, err)
		busy := make(chan struct{})
		require.NoError(t, sched.Schedule(func(ctx context.Context) { close(busy); <-ctx.Done() }))
		<-busy // the scheduler's only goroutine is taken
		obs := &countingObserver{}
		d := started(t, flux.FromSlice(exchanges(10, 5)), testkit.Perform,
			dispatch.WithScheduler(sched), dispatch.WithObserver(obs))
		synctest.Wait() // the source completed; five lanes wait for the scheduler
		assert.Equal(t, dispatch.Stats{Received: 10, InFlight: 10}, d.Stats())
		sched.Dispose() // drops the queued lane tasks
		<-sched.Done()
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Fatalf("the dispatcher did not end an hour after its scheduler was disposed: state %v, %+v", d.State(), d.Stats())
		}
		assert.Equal(t, dispatch.Stats{Received: 10, Discarded: 10}, d.Stats())
		assert.True(t, every(obs.reasons, schedulers.ErrRejected), "discarded for the refusal: %v", obs.reasons)
		assert.ErrorIs(t, d.Err(), schedulers.ErrRejected, "the refusal is the dispatcher's error")
	})
}

// A handler's Goexit on the Immediate scheduler ends the goroutine that
// called Schedule: the dispatcher's own source goroutine. The dispatcher
// must not stay RUNNING with nobody pulling its source: it ends, with every
// exchange accounted for and the Goexit as its error.
func TestHandlerGoexitOnImmediateSchedulerEndsTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		d := started(t, flux.FromSlice(exchanges(10, 2)), func(context.Context, testkit.Exchange) error {
			if calls.Add(1) == 3 {
				runtime.Goexit()
			}
			return nil
		}, dispatch.WithScheduler(schedulers.Immediate()))
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("the dispatcher did not end after its source goroutine exited: state %v, %+v", d.State(), d.Stats())
		}
		s := d.Stats()
		assert.Zero(t, s.InFlight)
		assert.EqualValues(t, 1, s.Failed, "the Goexit failed its exchange")
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.ErrorIs(t, d.Err(), schedulers.ErrGoexit, "the source stopped early: that is an error")
	})
}

// recordingHandler is a slog.Handler that keeps every record, with the
// logTraceKey value of its ctx.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
	traces  []any
}

// logTraceKey marks the ctx a record was logged with.
type logTraceKey struct{}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	h.traces = append(h.traces, ctx.Value(logTraceKey{}))
	return nil
}

// withMessage returns the records with message msg.
func (h *recordingHandler) withMessage(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rs []slog.Record
	for _, r := range h.records {
		if r.Message == msg {
			rs = append(rs, r)
		}
	}
	return rs
}

// attr returns the value of r's attribute key.
func attr(r slog.Record, key string) (v slog.Value, ok bool) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}

// An exchange whose AggregateID panics fails alone in a Dispatcher, as in a
// MainDispatcher, also when the failure is logged: logging it must not call
// AggregateID again unguarded (the panic would escape onto the source's
// goroutine and end the source).
func TestAggregateIDPanicFailsOneExchangeWithALogger(t *testing.T) {
	xs := make([]panickyID, 100)
	for i := range xs {
		xs[i] = panickyID{id: itoa(i % 7), bad: i == 50}
	}
	logs := &recordingHandler{}
	obs := &countingObserver{}
	d := started(t, flux.FromSlice(xs), func(context.Context, panickyID) error { return nil },
		dispatch.WithParallelism(4), dispatch.WithObserver(obs),
		dispatch.WithLogger(slog.New(logs)))
	<-d.Done()
	assert.NoError(t, d.Err(), "the source did not fail")
	assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 99, Failed: 1}, d.Stats())
	require.EqualValues(t, 1, obs.finished[dispatch.OutcomeError].Load())
	assert.ErrorIs(t, obs.errs[0], dispatch.ErrInvalidGroupKey)
	assert.Len(t, logs.withMessage("dispatch: exchange failed"), 1, "the failure is logged")
}

// refusingScheduler counts the tasks scheduled and refuses them once told,
// as an owned scheduler does once its owner disposes it after the run.
type refusingScheduler struct {
	schedulers.Scheduler
	scheduled atomic.Int64
	refuse    atomic.Bool
}

func (s *refusingScheduler) Schedule(task schedulers.Task) error {
	s.scheduled.Add(1)
	if s.refuse.Load() {
		return schedulers.ErrRejected
	}
	return s.Scheduler.Schedule(task)
}

// A consumer leaving its lane looks again once it went idle, for a push that
// saw the lane running. In that window the push can kick the lane, another
// consumer drain it and leave: the look-again then wins an empty lane. It
// must not schedule it: that task comes after the last exchange ended, and a
// run whose owned scheduler is being disposed then failed with "scheduler
// refused work" though every exchange succeeded (10-12 runs in 2,000).
func TestLookAgainAfterAnotherConsumerDrainedSchedulesNothing(t *testing.T) {
	pool, err := schedulers.NewParallel("leave", 2)
	require.NoError(t, err)
	t.Cleanup(func() { pool.Dispose(); <-pool.Done() })
	sched := &refusingScheduler{Scheduler: pool}

	var d *dispatch.Dispatcher[int]
	var calls atomic.Int32
	secondIdle := make(chan struct{})
	secondErr := make(chan error, 1)
	restore := dispatch.SetTestHookIdle(func() {
		switch calls.Add(1) {
		case 1: // the first consumer, idle after exchange 1: exchange 2 comes
			secondErr <- d.Emit(context.Background(), 2)
			select {
			case <-secondIdle: // another consumer drained exchange 2 and left
			case <-time.After(hang):
				panic("exchange 2 was not drained by another consumer")
			}
			sched.refuse.Store(true) // every exchange ended: the owner disposes
		case 2:
			close(secondIdle)
		}
	})
	d = startedKeyed(t, nil, func(int) int { return 0 }, func(context.Context, int) error { return nil },
		dispatch.WithScheduler(sched))
	require.NoError(t, d.Emit(t.Context(), 1))
	require.NoError(t, <-secondErr)
	require.NoError(t, d.StopGracefully(t.Context()))
	require.NoError(t, pool.DisposeGracefully(t.Context())) // the first consumer's task returned
	restore()
	assert.NoError(t, d.Err(), "a run whose every exchange succeeded")
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	assert.Equal(t, int64(2), sched.scheduled.Load(), "one task per kick, none for the empty lane")
}
