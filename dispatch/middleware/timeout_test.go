package middleware_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch/middleware"
)

// waitCtx returns ctx's error once it is done.
func waitCtx(ctx context.Context, _ job) error {
	<-ctx.Done()
	return ctx.Err()
}

// requireTimeout checks that err is a Timeout's, with message msg.
func requireTimeout(t *testing.T, err error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, middleware.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualError(t, err, msg)
}

func TestTimeoutEndsAHandlerThatWatchesItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		err := timeout(t, 3*time.Second)(waitCtx)(t.Context(), job{})
		require.Equal(t, 3*time.Second, time.Since(t0))
		requireTimeout(t, err, "middleware: timeout after 3s: context deadline exceeded")
	})
}

// A handler that ignores its ctx is not preempted: its own error comes
// back wrapped, its success stays a success.
func TestTimeoutDoesNotPreempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := errors.New("late")
		for _, want := range []error{late, nil} {
			t0 := time.Now()
			err := timeout(t, time.Second)(func(context.Context, job) error {
				time.Sleep(5 * time.Second) // work that ignores ctx
				return want
			})(t.Context(), job{})
			require.Equal(t, 5*time.Second, time.Since(t0), "the handler ran to its end")
			if want == nil {
				require.NoError(t, err)
				continue
			}
			require.ErrorIs(t, err, late)
			requireTimeout(t, err, "middleware: timeout after 1s: context deadline exceeded: late")
		}
	})
}

func TestTimeoutLeavesOtherErrorsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := errors.New("fast")
		err := timeout(t, time.Second)(func(context.Context, job) error { return fast })(t.Context(), job{})
		require.Same(t, fast, err, "failed before the deadline")

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		err = timeout(t, time.Second)(waitCtx)(ctx, job{})
		require.ErrorIs(t, err, context.Canceled, "the parent's cancellation")
		require.NotErrorIs(t, err, middleware.ErrTimeout)

		parent, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer stop()
		err = timeout(t, time.Second)(waitCtx)(parent, job{})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, middleware.ErrTimeout, "the parent's sooner deadline is not the middleware's")
	})
}

// Inside Retry each attempt has its own deadline, and a timed-out attempt
// is retried.
func TestTimeoutPerAttemptInsideRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var deadlines []time.Duration
		t0 := time.Now()
		h := func(ctx context.Context, _ job) error {
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, dl.Sub(t0))
			if len(deadlines) < 3 {
				return waitCtx(ctx, job{})
			}
			return nil
		}
		err := middleware.Chain(h, retry(t, constant(time.Second)), timeout(t, 2*time.Second))(t.Context(), job{})
		require.NoError(t, err)
		require.Equal(t, []time.Duration{2 * time.Second, 5 * time.Second, 8 * time.Second}, deadlines,
			"attempts start at 0, 3 s and 6 s, each with 2 s")
	})
}

// Outside Retry the deadline bounds the whole exchange, waits included.
func TestTimeoutAroundRetryBoundsTheExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		h := func(context.Context, job) error { calls++; return errTransient }
		t0 := time.Now()
		err := middleware.Chain(h, timeout(t, 2500*time.Millisecond), retry(t, constant(time.Second)))(t.Context(), job{})
		require.Equal(t, 2500*time.Millisecond, time.Since(t0), "the third wait was cut short")
		require.Equal(t, 3, calls)
		require.ErrorIs(t, err, middleware.ErrRetryStopped)
		require.ErrorIs(t, err, middleware.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, errTransient)
	})
}

func TestTimeoutInvalidDuration(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		mw, err := middleware.Timeout[job](d)
		require.Nil(t, mw)
		require.ErrorIs(t, err, middleware.ErrInvalidOption)
		require.ErrorContains(t, err, "middleware: invalid option: Timeout: duration")
	}
}
