package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// edgeEmitAsync runs Emit on its own goroutine and returns where its result
// arrives.
func edgeEmitAsync(d *dispatch.Dispatcher[testkit.Exchange], x testkit.Exchange) <-chan error {
	res := make(chan error, 1)
	go func() { res <- d.Emit(context.Background(), x) }()
	return res
}

// A producer waiting in Emit for the pending budget is released by Quiesce
// with ErrStopped, at once: it does not wait for a slow handler to free a
// unit.
func TestEmitWaitingForBudgetIsReleasedByQuiesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // a slow handler: an hour of I/O, say
			return nil
		}, dispatch.WithMaxPending(1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := edgeEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait() // the second Emit waits for the budget
		d.Quiesce()
		synctest.Wait()
		received := false
		select {
		case err := <-second:
			received = true
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked after Quiesce (state %v, %+v): the stop does not release a producer waiting for the budget", d.State(), d.Stats())
		}
		close(release)
		<-d.Done()
		if !received {
			<-second
		}
	})
}

// The same after ForceStop, with a handler that ignores its context: the
// dispatcher is STOPPED and Emit returns ErrStopped, though the handler
// still runs.
func TestEmitWaitingForBudgetIsReleasedByForceStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // ignores ctx
			return nil
		}, dispatch.WithMaxPending(1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := edgeEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait()
		d.ForceStop()
		synctest.Wait()
		require.Equal(t, component.StateStopped, d.State())
		received := false
		select {
		case err := <-second:
			received = true
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked on a STOPPED dispatcher (%+v)", d.Stats())
		}
		close(release)
		<-d.Done()
		if !received {
			<-second
		}
	})
}

// A handler may feed a follow-up back with Emit on the Immediate scheduler,
// where the lane runs inline on Emit's caller: Emit holds no lock while it
// schedules, so the nested Emit neither deadlocks nor needs a force.
func TestEmitFromHandlerOnImmediate(t *testing.T) {
	var d *dispatch.Dispatcher[testkit.Exchange]
	d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, func(ctx context.Context, x testkit.Exchange) error {
		if x.Seq == 0 {
			return d.Emit(ctx, testkit.Exchange{ID: x.ID, Seq: 1})
		}
		return nil
	}, quiet, dispatch.WithScheduler(schedulers.Immediate()))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	// no cleanup waiting for Done: if the defect is there, Done never closes
	res := edgeEmitAsync(d, testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: 0})
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
