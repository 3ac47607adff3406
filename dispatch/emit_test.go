package dispatch_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// hang is how long, in virtual time, a test waits for something that only a
// hang would keep from happening: the bubble's clock gets there only once
// every goroutine in it is blocked.
const hang = time.Hour

// emitAll emits xs in order with ctx, stopping at the first error.
func emitAll(ctx context.Context, d *dispatch.Dispatcher[testkit.Exchange], xs []testkit.Exchange) error {
	for _, x := range xs {
		if err := d.Emit(ctx, x); err != nil {
			return err
		}
	}
	return nil
}

// producerExchanges returns n exchanges of producer p over ids ids of its
// own, so that the per-id order is the order p emits them in.
func producerExchanges(p, n, ids int) []testkit.Exchange {
	xs := make([]testkit.Exchange, n)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "p"+strconv.Itoa(p)+"-"+strconv.Itoa(i%ids)), Seq: i / ids}
	}
	return xs
}

// Several goroutines Emit at once: nothing is lost, each id keeps the order
// its producer emitted it in, each group is serial (and -race sees the
// hand-off from every producer to the lanes).
func TestEmitFromSeveralGoroutines(t *testing.T) {
	const producers, n, p = 4, 500, 16
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) }, testkit.Perform)
	d := started(t, nil, rec.Handle, dispatch.WithParallelism(p),
		dispatch.WithScheduler(newParallel(t, 4)))
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() { assert.NoError(t, emitAll(t.Context(), d, producerExchanges(i, n, 10))) })
	}
	wg.Wait()
	require.NoError(t, d.StopGracefully(t.Context()))
	calls := rec.Calls()
	assert.NoError(t, testkit.PerKeyFIFO(calls))
	assert.NoError(t, testkit.GroupSerial(calls))
	assert.NoError(t, testkit.NoLoss(producers*n, d.Stats(), calls))
	assert.Equal(t, dispatch.Stats{Received: producers * n, Succeeded: producers * n}, d.Stats())
}

// The same with a pending budget smaller than the number of producers, so
// that several of them wait for room at once: every Emit must get through.
// A waiting Emit counts itself in the budget, so with two waiters and a
// budget of 1 the room they wait for never comes (flow.go, budget.acquire).
func TestEmitSeveralWaitersGetThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const producers, n = 4, 50
		release := make(chan struct{})
		var first atomic.Bool
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(8) },
			func(ctx context.Context, x testkit.Exchange) error {
				if first.CompareAndSwap(false, true) {
					<-release // hold the budget until every producer waits
				}
				return nil
			})
		d := started(t, nil, rec.Handle, dispatch.WithParallelism(8),
			dispatch.WithMaxPending(1), dispatch.WithScheduler(newParallel(t, 2)))
		ctx, cancel := context.WithTimeout(t.Context(), hang)
		defer cancel()
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() { assert.NoError(t, emitAll(ctx, d, producerExchanges(i, n, 3)), "producer %d", i) })
		}
		synctest.Wait() // one exchange handled and held, every producer waiting for room
		close(release)
		wg.Wait()
		require.NoError(t, d.StopGracefully(ctx))
		calls := rec.Calls()
		assert.NoError(t, testkit.PerKeyFIFO(calls))
		assert.Equal(t, dispatch.Stats{Received: producers * n, Succeeded: producers * n}, d.Stats())
	})
}

// With the budget used up by a blocked handler, Emit waits; when its ctx
// ends it returns ctx's cause and the exchange is not counted.
func TestEmitBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var handled atomic.Int64
		d := started(t, nil, func(context.Context, testkit.Exchange) error {
			if handled.Add(1) == 1 {
				<-release
			}
			return nil
		}, dispatch.WithMaxPending(1))
		xs := exchanges(3, 3)
		require.NoError(t, d.Emit(t.Context(), xs[0]))
		synctest.Wait() // its handler holds the only unit of the budget

		waitCause := errors.New("the producer gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- d.Emit(ctx, xs[1]) }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Emit returned %v while the budget is used up", err)
		default:
		}
		assert.Equal(t, dispatch.Stats{Received: 1, InFlight: 1}, d.Stats(), "a waiting exchange is not counted")
		cancel(waitCause)
		assert.ErrorIs(t, <-errc, waitCause, "Emit returns ctx's cause")
		assert.Equal(t, dispatch.Stats{Received: 1, InFlight: 1}, d.Stats(), "the exchange given up is not counted")

		// The unit the cancelled Emit held is given back: once the handler
		// returns, the next Emit gets through without waiting.
		close(release)
		synctest.Wait()
		start := time.Now()
		require.NoError(t, d.Emit(t.Context(), xs[2]))
		assert.Zero(t, time.Since(start))
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	})
}

// Emit before Start and after a stop returns ErrStopped and counts nothing;
// Emit on a dispatcher with a source is refused.
func TestEmitOutsideRunning(t *testing.T) {
	x := exchanges(1, 1)[0]
	d, err := dispatch.New("orders", orders, nil, testkit.Perform, quiet)
	require.NoError(t, err)
	assert.ErrorIs(t, d.Emit(t.Context(), x), dispatch.ErrStopped, "before Prepare")
	require.NoError(t, d.Prepare(t.Context()))
	assert.ErrorIs(t, d.Emit(t.Context(), x), dispatch.ErrStopped, "before Start")
	require.NoError(t, d.Start())
	require.NoError(t, d.Emit(t.Context(), x))
	require.NoError(t, d.StopGracefully(t.Context()))
	err = d.Emit(t.Context(), x)
	assert.ErrorIs(t, err, dispatch.ErrStopped, "after a graceful stop")
	assert.ErrorContains(t, err, `dispatcher "orders"`)
	assert.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, d.Stats(), "a refused Emit is not counted")

	f := started(t, nil, testkit.Perform)
	f.ForceStop()
	<-f.Done()
	assert.ErrorIs(t, f.Emit(t.Context(), x), dispatch.ErrStopped, "after a force")
	assert.Equal(t, dispatch.Stats{}, f.Stats())

	s := started(t, flux.FromSlice(exchanges(3, 1)), testkit.Perform)
	assert.ErrorIs(t, s.Emit(t.Context(), x), dispatch.ErrIllegalState, "a dispatcher with a source")
	<-s.Done()
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, s.Stats())
}

// An exchange Emit cannot route is counted and fails (or, in a
// MainDispatcher, is discarded) and Emit returns nil.
func TestEmitUnroutable(t *testing.T) {
	obs := &countingObserver{}
	d := startedKeyed(t, nil, func(i int) int { return i }, func(context.Context, int) error { return nil },
		dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	for _, i := range []int{0, -1, 3, 4} {
		require.NoError(t, d.Emit(t.Context(), i))
	}
	require.NoError(t, d.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 4, Succeeded: 2, Failed: 2}, d.Stats())
	assert.True(t, every(obs.errs, dispatch.ErrInvalidGroupKey))

	// A key function that panics fails its exchange alone; Emit returns nil
	// and the next exchange is admitted.
	obs = &countingObserver{}
	d = startedKeyed(t, nil, func(i int) int {
		if i == 1 {
			panic("bad key")
		}
		return i
	}, func(context.Context, int) error { return nil }, dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, d.Emit(t.Context(), i))
	}
	require.NoError(t, d.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 2, Failed: 1}, d.Stats())
	require.Len(t, obs.errs, 1)
	assert.ErrorIs(t, obs.errs[0], dispatch.ErrInvalidGroupKey)
	var pe *dispatch.PanicError
	assert.ErrorAs(t, obs.errs[0], &pe)
	assert.ErrorContains(t, obs.errs[0], "key function panicked")

	sup, _ := countingSupplier(t)
	var unknown atomic.Int64
	m := newMain(t, nil, testkit.Perform, sup, dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
		assert.ErrorIs(t, reason, dispatch.ErrUnknownAggregate)
		unknown.Add(1)
	}))
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	for _, x := range mixed(30, 3, orders, invoices, payments) {
		require.NoError(t, m.Emit(t.Context(), x))
	}
	require.NoError(t, m.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 30, Succeeded: 20, Discarded: 10}, m.Stats())
	assert.EqualValues(t, 10, unknown.Load())
}

// A stop that comes while Emit routes an exchange it cannot route must still
// let the dispatcher end: the failed exchange is the last one in flight.
// Here the key function (user code, called by Emit) is held while Quiesce
// shuts the intake.
func TestEmitUnroutableRacingQuiesceEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		d := startedKeyed(t, nil, func(i int) int {
			if i < 0 {
				close(entered)
				<-release
			}
			return i
		}, func(context.Context, int) error { return nil }, dispatch.WithParallelism(4))
		errc := make(chan error, 1)
		go func() { errc <- d.Emit(t.Context(), -1) }()
		<-entered
		d.Quiesce() // the intake shuts while the exchange is received, not yet failed
		close(release)
		require.NoError(t, <-errc)
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("not done an hour after the last exchange failed: state %v, %+v", d.State(), d.Stats())
		}
		assert.Equal(t, component.StateStopped, d.State())
		assert.Equal(t, dispatch.Stats{Received: 1, Failed: 1}, d.Stats())
	})
}

// A push-mode dispatcher has no source: a graceful stop whose ctx is over
// must not blame one. (Its ctx ended before the intake goroutine saw the
// drain, so the stop may well report ctx's error; the description of what
// is left must be true.)
func TestEmitStopTimeoutDoesNotBlameASource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := started(t, nil, testkit.Perform)
		require.NoError(t, d.Emit(t.Context(), exchanges(1, 1)[0]))
		synctest.Wait() // handled: nothing in flight
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := d.StopGracefully(ctx); err != nil {
			assert.ErrorIs(t, err, context.Canceled)
			assert.NotContains(t, err.Error(), "source", "a dispatcher fed by Emit has no source")
		}
		<-d.Done()
	})
}
