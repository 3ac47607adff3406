package middleware_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// On a real dispatcher, exchanges of one aggregate that fail transiently
// are handled in order: every attempt of the next starts after the last
// attempt of the previous one.
func TestRetryKeepsTheGroupOrderOnADispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 2 // three ids in two groups: colliding ids are serialised too
		xs := jobs(
			[]string{"alice", "bob", "carol", "alice", "bob", "carol", "alice", "bob", "carol", "alice"},
			[]int{3, 0, 2, 1, 4, 0, 0, 2, 1, 5})
		f := newFlaky()
		inner := testkit.NewRecorder(tagOf(groups), f.handle)
		outer := testkit.NewRecorder(tagOf(groups), retry(t, constant(time.Second))(inner.Handle))
		d := start(t, xs, outer.Handle, groups)
		<-d.Done()
		require.NoError(t, d.Err())
		require.Equal(t, dispatch.Stats{Received: 10, Succeeded: 10}, d.Stats())

		require.NoError(t, testkit.PerKeyFIFO(outer.Calls()), "exchanges end in order")
		require.NoError(t, testkit.GroupSerial(outer.Calls()))
		require.NoError(t, testkit.NoLoss(int64(len(xs)), d.Stats(), outer.Calls()))
		require.NoError(t, attemptsInOrder(inner.Calls(), wantAttempts(xs)), "attempts in order")
		require.NoError(t, testkit.GroupSerial(inner.Calls()), "no attempt overlaps another of its group")
	})
}

// A ForceStop during a long backoff wait ends it at once: Done closes
// with no virtual time elapsed, the exchange fails as cancelled, and the
// exchanges queued behind it are discarded.
func TestForceStopInterruptsABackoffWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := jobs([]string{"alice", "alice", "alice"}, []int{1 << 30, 0, 0})
		f := newFlaky()
		obs := &outcomes{}
		calls := 0
		h := retry(t, constant(time.Hour), middleware.WithMaxElapsedTime(0))(func(ctx context.Context, j job) error {
			calls++
			return f.handle(ctx, j)
		})
		d := start(t, xs, h, 4, dispatch.WithObserver(obs))
		synctest.Wait() // the first attempt failed; the hour's wait began
		require.Equal(t, 1, calls)
		t0 := time.Now()
		d.ForceStop()
		<-d.Done()
		require.Zero(t, time.Since(t0), "no backoff elapsed")
		require.Equal(t, dispatch.Stats{Received: 3, Failed: 1, Discarded: 2}, d.Stats())
		require.Equal(t, []dispatch.Outcome{dispatch.OutcomeCancelled}, obs.finished)
		require.ErrorIs(t, obs.errs[0], middleware.ErrRetryStopped)
		require.ErrorIs(t, obs.errs[0], dispatch.ErrForceStopped)
		require.ErrorIs(t, obs.errs[0], errTransient)
		require.Len(t, obs.reasons, 2)
		for _, r := range obs.reasons {
			require.ErrorIs(t, r, dispatch.ErrForceStopped)
		}
		require.Equal(t, 1, calls, "no attempt after the force")
	})
}

// A graceful stop does not interrupt the retries: it waits for them
// within its deadline.
func TestGracefulStopWaitsForRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := jobs([]string{"alice", "alice"}, []int{3, 3})
		d := start(t, xs, retry(t, constant(time.Second))(newFlaky().handle), 4)
		synctest.Wait()
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		require.NoError(t, d.StopGracefully(ctx))
		require.Equal(t, 6*time.Second, time.Since(t0), "three waits of 1 s for each exchange")
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	})
}

// A graceful stop whose deadline passes during the retries returns, the
// retries going on; a force then ends them at once.
func TestGracefulStopDeadlineThenForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := jobs([]string{"alice", "alice"}, []int{3, 0})
		obs := &outcomes{}
		d := start(t, xs, retry(t, constant(time.Second))(newFlaky().handle), 4, dispatch.WithObserver(obs))
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 2500*time.Millisecond, time.Since(t0))
		require.Equal(t, int64(2), d.Stats().InFlight, "still retrying the first exchange")
		d.ForceStop()
		<-d.Done()
		require.Equal(t, 2500*time.Millisecond, time.Since(t0), "the force waited for nothing")
		require.Equal(t, dispatch.Stats{Received: 2, Failed: 1, Discarded: 1}, d.Stats())
		require.Equal(t, []dispatch.Outcome{dispatch.OutcomeCancelled}, obs.finished)
	})
}

// A panic goes through Retry unretried; the dispatcher recovers it.
func TestRetryPanicReachesTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		obs := &outcomes{}
		h := retry(t, constant(time.Second))(func(context.Context, job) error {
			calls++
			panic("boom")
		})
		d := start(t, jobs([]string{"alice"}, []int{0}), h, 4, dispatch.WithObserver(obs))
		<-d.Done()
		require.Equal(t, 1, calls)
		require.Equal(t, []dispatch.Outcome{dispatch.OutcomePanic}, obs.finished)
		var pe *dispatch.PanicError
		require.ErrorAs(t, obs.errs[0], &pe)
		require.Equal(t, "boom", pe.Value)
	})
}

// The usual stack on a dispatcher: the exchange that exhausts its retries
// is dead-lettered and counted as handled; one whose hook fails is Failed.
func TestDeadLetterOnADispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := jobs([]string{"alice", "bob", "alice"}, []int{1 << 30, 1 << 30, 0})
		var parked []job
		var hooked []error
		dl := deadLetter(t, func(_ context.Context, j job, err error) error {
			hooked = append(hooked, err)
			if j.id.ID == "bob" {
				return errDLQDown
			}
			parked = append(parked, j)
			return nil
		})
		obs := &outcomes{}
		h := middleware.Chain(newFlaky().handle, dl, retry(t, constant(time.Second), middleware.WithMaxTries(3)))
		d := start(t, xs, h, 1, dispatch.WithObserver(obs)) // one group: the hook's append is serial
		<-d.Done()
		require.Equal(t, dispatch.Stats{Received: 3, Succeeded: 2, Failed: 1}, d.Stats())
		require.Equal(t, []job{xs[0]}, parked)
		require.Len(t, hooked, 2)
		for _, err := range hooked {
			require.ErrorIs(t, err, middleware.ErrRetriesExhausted, "the hook sees the final failure")
		}
		require.Len(t, obs.errs, 3)
		var failed []error
		for _, err := range obs.errs {
			if err != nil {
				failed = append(failed, err)
			}
		}
		require.Len(t, failed, 1)
		require.ErrorIs(t, failed[0], middleware.ErrDeadLetter)
		require.ErrorIs(t, failed[0], errDLQDown)
		require.ErrorIs(t, failed[0], middleware.ErrRetriesExhausted)
	})
}

// A force during the retries is not dead-lettered: the exchange failed of
// the stop, and must not be acked.
func TestDeadLetterSkipsAForcedExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hooked := 0
		dl := deadLetter(t, func(context.Context, job, error) error { hooked++; return nil })
		forever := middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Minute) })
		h := middleware.Chain(newFlaky().handle, dl, retry(t, forever, middleware.WithMaxElapsedTime(0)))
		d := start(t, jobs([]string{"alice"}, []int{1 << 30}), h, 1)
		synctest.Wait()
		d.ForceStop()
		<-d.Done()
		require.Zero(t, hooked)
		require.Equal(t, dispatch.Stats{Received: 1, Failed: 1}, d.Stats())
	})
}

// A panic of the dead-letter hook is the handler's: the dispatcher
// recovers it and counts the exchange Failed.
func TestDeadLetterHookPanicOnADispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &outcomes{}
		dl := deadLetter(t, func(context.Context, job, error) error { panic("hook") })
		h := middleware.Chain(newFlaky().handle, dl)
		d := start(t, jobs([]string{"alice", "alice"}, []int{1, 0}), h, 1, dispatch.WithObserver(obs))
		<-d.Done()
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, d.Stats(), "the group went on")
		require.Equal(t, []dispatch.Outcome{dispatch.OutcomePanic, dispatch.OutcomeSuccess}, obs.finished)
		var pe *dispatch.PanicError
		require.ErrorAs(t, obs.errs[0], &pe)
		require.Equal(t, "hook", pe.Value)
	})
}

// The cost of a retry inside the handler: a group in backoff holds one
// scheduler goroutine. On two goroutines, two groups in backoff stall every
// other group for the length of their retries; on a bounded elastic
// scheduler the other groups run at once.
func TestBackoffHoldsASchedulerGoroutine(t *testing.T) {
	const groups = 64
	ids := []string{"slow-a", "slow-b", "fast-0", "fast-1", "fast-2", "fast-3", "fast-4", "fast-5"}
	seen := map[int]bool{}
	for _, id := range ids {
		g := aggregate.GroupKey(id, groups)
		require.False(t, seen[g], "every id in a group of its own")
		seen[g] = true
	}
	for name, c := range map[string]struct {
		sched func() (schedulers.Scheduler, error)
		fast  time.Duration // when the last fast exchange ended
	}{
		"parallel(2)":        {func() (schedulers.Scheduler, error) { return schedulers.NewParallel("p", 2) }, 3 * time.Second},
		"boundedElastic(16)": {func() (schedulers.Scheduler, error) { return schedulers.NewBoundedElastic("e", 16) }, 0},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sched, err := c.sched()
				require.NoError(t, err)
				t0 := time.Now()
				var mu sync.Mutex
				var fastEnd time.Duration
				f := newFlaky()
				h := retry(t, constant(time.Second))(func(ctx context.Context, j job) error {
					if err := f.handle(ctx, j); err != nil {
						return err
					}
					if strings.HasPrefix(j.id.ID, "fast") {
						mu.Lock()
						fastEnd = max(fastEnd, time.Since(t0))
						mu.Unlock()
					}
					return nil
				})
				d := start(t, jobs(ids, []int{3, 3, 0, 0, 0, 0, 0, 0}), h, groups, dispatch.WithScheduler(sched))
				<-d.Done()
				require.NoError(t, sched.DisposeGracefully(context.Background()))
				require.Equal(t, 3*time.Second, time.Since(t0), "the slow ones took their three waits")
				require.Equal(t, c.fast, fastEnd)
				require.Equal(t, dispatch.Stats{Received: 8, Succeeded: 8}, d.Stats())
			})
		})
	}
}
