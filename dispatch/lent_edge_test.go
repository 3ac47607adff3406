package dispatch_test

import (
	"context"
	"sync/atomic"
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

// A lent scheduler disposed by force while every goroutine of it is busy
// with someone else's task that ignores its ctx: the dispatcher learns of it
// from the scheduler's Context, discards the lanes whose tasks were dropped,
// and stops with schedulers.ErrRejected, without waiting for that task.
func TestLentSchedulerDisposedWhileBusyIsNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("busy", 1)
		require.NoError(t, err)
		busy, release := make(chan struct{}), make(chan struct{})
		require.NoError(t, sched.Schedule(func(context.Context) { close(busy); <-release }))
		<-busy
		d := started(t, flux.FromSlice(exchanges(10, 5)), testkit.Perform,
			dispatch.WithScheduler(sched))
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

// A running lane stops handling its batch as soon as its lent scheduler is
// disposed by force: the rest of the batch is discarded, not handed to the
// handler with a cancelled context.
func TestLaneBatchStopsAtForcedDisposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("edge", 1, schedulers.WithLogger(discardLogger))
		require.NoError(t, err)
		first, release := make(chan struct{}), make(chan struct{})
		var calls, afterCancel atomic.Int64
		d := started(t, flux.FromSlice(exchanges(100, 1)), func(ctx context.Context, x testkit.Exchange) error {
			calls.Add(1)
			if x.Seq == 0 {
				close(first)
				<-release // a call in progress that does not watch ctx
				return nil
			}
			if ctx.Err() != nil {
				afterCancel.Add(1)
			}
			return ctx.Err()
		}, dispatch.WithScheduler(sched))
		<-first
		synctest.Wait() // the source is read to its end: 99 exchanges queued behind the first
		sched.Dispose()
		synctest.Wait() // the dispatcher has seen the disposal
		close(release)
		<-d.Done()
		<-sched.Done()
		s := d.Stats()
		assert.EqualValues(t, 1, calls.Load(), "handler calls after the forced disposal (%d with a cancelled ctx); %+v", afterCancel.Load(), s)
		assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 1, Discarded: 99}, s)
	})
}
