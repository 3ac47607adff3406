package dispatch_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

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
