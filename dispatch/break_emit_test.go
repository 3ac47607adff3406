package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// brkEmitAsync runs Emit on its own goroutine and returns where its result
// arrives.
func brkEmitAsync(d *dispatch.Dispatcher[testkit.Exchange], x testkit.Exchange) <-chan error {
	res := make(chan error, 1)
	go func() { res <- d.Emit(context.Background(), x) }()
	return res
}

// Emit's doc: "once the intake shut it returns an error wrapping ErrStopped",
// and Quiesce is "prompt". A producer waiting in Emit for the pending budget
// is not woken by Quiesce: it waits until a handler frees a unit, i.e. for
// as long as the slowest running handler takes. (A source-fed dispatcher
// waits on its source ctx, which the stop cancels; Emit waits only on the
// caller's ctx.)
func TestBreakEmitWaitingForBudgetIsNotReleasedByQuiesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // a slow handler: an hour of I/O, say
			return nil
		}, dispatch.WithMaxPending[testkit.Exchange](1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := brkEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait() // the second Emit waits for the budget
		d.Quiesce()
		synctest.Wait()
		select {
		case err := <-second:
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked after Quiesce (state %v, %+v): the stop does not release a producer waiting for the budget", d.State(), d.Stats())
		}
		close(release)
		<-d.Done()
		<-second
	})
}

// Same after ForceStop, with a handler that ignores its context (the case
// ForceStop's doc covers: "returns at once; Done says when the last handler
// returned"). The dispatcher is STOPPED, yet Emit keeps its caller blocked
// until that handler returns, which may be never.
func TestBreakEmitWaitingForBudgetIsNotReleasedByForceStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // ignores ctx
			return nil
		}, dispatch.WithMaxPending[testkit.Exchange](1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := brkEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait()
		d.ForceStop()
		synctest.Wait()
		require.Equal(t, dispatch.StateStopped, d.State())
		select {
		case err := <-second:
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked on a STOPPED dispatcher (%+v)", d.Stats())
		}
		close(release)
		<-d.Done()
		<-second
	})
}

// A handler that feeds a follow-up back with Emit (on a push-mode
// dispatcher, which has no bounded source) deadlocks for good on the
// Immediate scheduler: Emit holds its admission mutex while the push runs
// the lane inline, and the handler's Emit takes that mutex again. Neither
// ForceStop nor the handler's ctx can end it: Done never closes.
func TestBreakEmitFromHandlerOnImmediateDeadlocks(t *testing.T) {
	var d *dispatch.Dispatcher[testkit.Exchange]
	d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, func(ctx context.Context, x testkit.Exchange) error {
		if x.Seq == 0 {
			return d.Emit(ctx, testkit.Exchange{ID: x.ID, Seq: 1})
		}
		return nil
	}, quiet, dispatch.WithScheduler[testkit.Exchange](schedulers.Immediate()))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	// no cleanup waiting for Done: if the defect is there, Done never closes
	res := brkEmitAsync(d, testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: 0})
	select {
	case err := <-res:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		d.ForceStop()
		select {
		case <-d.Done():
			t.Errorf("Emit from a handler blocked until ForceStop on the Immediate scheduler")
		case <-time.After(2 * time.Second):
			t.Fatalf("Emit from a handler on the Immediate scheduler deadlocked; ForceStop does not end it (state %v, %+v)", d.State(), d.Stats())
		}
	}
	require.NoError(t, d.StopGracefully(context.Background()))
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
}
