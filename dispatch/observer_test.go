package dispatch_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// goexitOnDiscarded is an Observer whose Discarded ends its goroutine with
// runtime.Goexit, as a test observer calling t.FailNow would.
type goexitOnDiscarded struct{ *countingObserver }

func (o goexitOnDiscarded) Discarded(ctx context.Context, l dispatch.Labels, reason error) {
	o.countingObserver.Discarded(ctx, l, reason)
	runtime.Goexit()
}

// An Observer's Goexit in Discarded neither cuts a force's discarding short
// nor keeps the dispatcher from its end: every exchange dropped is reported
// and counted, in one lane as in the others.
func TestObserverGoexitOnDiscardedLetsTheForceEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		obs := goexitOnDiscarded{&countingObserver{}}
		xs := make([]int, 10)
		for i := range xs {
			xs[i] = i
		}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 2 }, func(ctx context.Context, _ int) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return ctx.Err()
		}, dispatch.WithParallelism(2), dispatch.WithObserver(obs))
		synctest.Wait() // one handler per lane blocked, the rest queued
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			d.ForceStop()
		}()
		<-stopped
		close(release)
		<-d.Done()
		s := d.Stats()
		assert.Zero(t, s.InFlight)
		require.Equal(t, int64(len(xs)), s.Received)
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.Positive(t, s.Discarded)
		assert.Equal(t, s.Discarded, obs.discarded.Load(), "each drop reported once")
	})
}
