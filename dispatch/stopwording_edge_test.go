package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// A graceful stop that times out once every exchange ended, while the
// source still runs, finds the dispatcher STOPPING (a graceful drain waits
// for the source, which may hold an item it took): "not stopped", naming
// the source. Once forced it is STOPPED (the logical end) but not done (the
// physical end): a timed-out stop's error says so, in the state's own
// terms, rather than "not stopped" beside a State() of STOPPED.
func TestTimedOutStopNamesTheState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		src := flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
			for _, x := range exchanges(3, 1) {
				if err := sink.Next(x); err != nil {
					return err
				}
			}
			<-release // ignores ctx
			return nil
		})
		d := started(t, src, testkit.Perform)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopping, d.State(), "the drain waits for the source")
		assert.ErrorContains(t, err, `dispatcher "orders" not stopped`)
		assert.ErrorContains(t, err, "source is still running")

		d.ForceStop()
		forced, cancelForced := context.WithTimeout(t.Context(), time.Second)
		defer cancelForced()
		err = d.StopGracefully(forced)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopped, d.State())
		assert.NotContains(t, err.Error(), "not stopped", "the state is STOPPED")
		assert.ErrorContains(t, err, `dispatcher "orders" stopped, not done`)
		released = true
		close(release)
		<-d.Done()
	})
}

// Timed out while handlers still run, the dispatcher is STOPPING: "not
// stopped" is then what it is.
func TestTimedOutStopNamesTheStateWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started(t, flux.Just(exchanges(1, 1)...), func(context.Context, testkit.Exchange) error {
			<-release
			return nil
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopping, d.State())
		assert.ErrorContains(t, err, `dispatcher "orders" not stopped`)
		close(release)
		require.NoError(t, d.StopGracefully(t.Context()))
	})
}
