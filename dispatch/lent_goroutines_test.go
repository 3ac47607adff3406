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
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// A dispatcher on a lent scheduler costs the goroutines of one on a
// scheduler it owns: none waits for the lent one's end, which still reaches
// it (TestLentSchedulerDisposedWhileBusyIsNoticed and the tests of a lent
// scheduler's disposal).
func TestLentSchedulerCostsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idle := flux.Create(func(ctx context.Context, _ flux.Sink[testkit.Exchange]) error {
			<-ctx.Done() // an idle source: subscribed, emitting nothing
			return nil
		})
		goroutines := func(opts ...dispatch.Option[testkit.Exchange]) int {
			before := runtime.NumGoroutine()
			d := started(t, idle, testkit.Perform, opts...)
			synctest.Wait()
			n := runtime.NumGoroutine() - before
			d.Quiesce()
			<-d.Done()
			return n
		}
		sched, err := schedulers.NewParallel("lent", 2)
		require.NoError(t, err)
		owned := goroutines()
		lent := goroutines(dispatch.WithScheduler(sched))
		assert.Equal(t, owned, lent, "goroutines of a dispatcher on a lent scheduler and on an owned one")
		assert.Equal(t, 1, owned, "the source's")
		require.NoError(t, sched.DisposeGracefully(context.Background()))
	})
}
