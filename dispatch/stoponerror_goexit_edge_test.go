package dispatch_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// WithOutcomeHook and the Observer's doc: an exchange whose hook (or
// Finished) ends its goroutine with runtime.Goexit is accounted for as if
// the call had returned. Under StopOnError a failed exchange then stops the
// dispatcher with that failure as Err, as it does when the hook returns.
func TestStopOnErrorHoldsWhenAHookOrFinishedGoexits(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]dispatch.Option[int]{
		"outcome hook": dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[int]) { runtime.Goexit() }),
		"Finished":     dispatch.WithObserver(goexitOnFinished{&countingObserver{}}),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				xs := make([]int, 100)
				for i := range xs {
					xs[i] = i
				}
				d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return 0 }, func(_ context.Context, i int) error {
					if i == 3 {
						return errBoom
					}
					return nil
				}, opt, dispatch.WithErrorPolicy(dispatch.StopOnError), dispatch.WithMaxPending(1))
				<-d.Done()
				require.ErrorIs(t, d.Err(), errBoom, "StopOnError: the first failure is Err")
				s := d.Stats()
				assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
				// One pending at a time: the stop comes before the next admission.
				assert.Equal(t, int64(3), s.Succeeded, "the failure stopped the dispatcher")
				assert.Equal(t, int64(1), s.Failed)
			})
		})
	}
}
