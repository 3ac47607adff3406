package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// A dispatcher learns that its lent scheduler was disposed by force from
// the context of a probe task it schedules at Start. When every goroutine
// of the scheduler is busy at Start (here with a task of someone else that
// does not watch its ctx: a handler of another dispatcher in a blocking
// call), Dispose drops the probe along with the lane tasks; the dispatcher
// then notices nothing until the scheduler's last goroutine exits. Its lanes
// stay "ready" for tasks that no longer exist: the exchanges are neither
// handled nor discarded, and it does not stop (TestSchedulerDisposedBefore-
// AnyLaneRanEndsTheDispatcher passes only because its busy task honours
// ctx, so Done of the scheduler closes at once).
func TestBreakLentSchedulerDisposedWhileBusyIsNotNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("busy", 1)
		require.NoError(t, err)
		busy, release := make(chan struct{}), make(chan struct{})
		require.NoError(t, sched.Schedule(func(context.Context) { close(busy); <-release }))
		<-busy
		d := started(t, flux.FromSlice(exchanges(10, 5)), testkit.Perform,
			dispatch.WithScheduler[testkit.Exchange](sched))
		synctest.Wait()
		sched.Dispose() // drops the probe and the lane tasks, cancels the task ctx
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("an hour after its scheduler was disposed the dispatcher is %v with %+v and Err %v",
				d.State(), d.Stats(), d.Err())
		}
		close(release)
		<-sched.Done()
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: 10, Discarded: 10}, d.Stats())
		assert.ErrorIs(t, d.Err(), schedulers.ErrRejected)
	})
}
