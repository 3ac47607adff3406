package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch/middleware"
)

// script is a handler whose n-th call returns errs[n] (nil past the end),
// recording the virtual time of each call since the script was made.
type script struct {
	errs  []error
	t0    time.Time
	calls []time.Duration
}

func newScript(errs ...error) *script { return &script{errs: errs, t0: time.Now()} }

func (s *script) handle(context.Context, job) error {
	n := len(s.calls)
	s.calls = append(s.calls, time.Since(s.t0))
	if n < len(s.errs) {
		return s.errs[n]
	}
	return nil
}

func constant(d time.Duration) middleware.RetryOption[job] {
	return middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(d) })
}

func TestRetrySucceedsAfterTransientFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(errTransient, errTransient, errTransient)
		err := retry(t, constant(time.Second))(s.handle)(t.Context(), job{})
		require.NoError(t, err)
		require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, s.calls,
			"one call at once, then one per constant wait")
	})
}

func TestRetryExhaustsMaxTries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := errors.New("third")
		s := newScript(errTransient, errTransient, last, nil)
		err := retry(t, constant(time.Second), middleware.WithMaxTries(3))(s.handle)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.ErrorIs(t, err, last, "the last attempt's error is wrapped")
		require.EqualError(t, err, "middleware: retries exhausted after attempt 3: third")
		require.Len(t, s.calls, 3)
	})
}

func TestRetryMaxTriesOneNeverRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(errTransient)
		err := retry(t, middleware.WithMaxTries(1))(s.handle)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.ErrorIs(t, err, errTransient)
		require.Len(t, s.calls, 1)
	})
}

// No wait is begun that would end past the maximum elapsed time.
func TestRetryMaxElapsedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(errTransient, errTransient, errTransient, errTransient, errTransient, errTransient)
		err := retry(t, constant(time.Second), middleware.WithMaxElapsedTime(3500*time.Millisecond))(s.handle)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, s.calls,
			"a fourth wait would end at 4 s")
		require.Equal(t, 3*time.Second, time.Since(s.t0), "no wait after the last attempt")
		require.EqualError(t, err, "middleware: retries exhausted after attempt 4: transient failure")
	})
}

// The time is counted from the first failure: a slow first attempt does
// not use it up.
func TestRetryElapsedCountsFromTheFirstFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		t0 := time.Now()
		h := func(context.Context, job) error {
			starts = append(starts, time.Since(t0))
			if len(starts) == 1 {
				time.Sleep(5 * time.Second) // a slow first attempt
			}
			return errTransient
		}
		err := retry(t, constant(time.Second), middleware.WithMaxElapsedTime(2*time.Second))(h)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.Equal(t, []time.Duration{0, 6 * time.Second, 7 * time.Second}, starts)
	})
}

func TestRetryUnboundedRetriesUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make([]error, 200)
		for i := range errs {
			errs[i] = errTransient
		}
		s := newScript(errs...)
		err := retry(t, constant(time.Hour), middleware.WithMaxElapsedTime(0))(s.handle)(t.Context(), job{})
		require.NoError(t, err)
		require.Len(t, s.calls, 201, "no bound on tries nor time")
		require.Equal(t, 200*time.Hour, s.calls[200])
	})
}

func TestRetryPolicyStopExhausts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(errTransient, errTransient)
		stop := middleware.WithBackOff(func() backoff.BackOff { return &backoff.StopBackOff{} })
		err := retry(t, stop)(s.handle)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.Len(t, s.calls, 1)
	})
}

func TestRetryDoesNotRetryNonRetryableErrors(t *testing.T) {
	fatal := errors.New("fatal")
	permanent := fmt.Errorf("wrapped: %w", backoff.Permanent(fatal))
	cases := map[string]struct {
		err  error
		opts []middleware.RetryOption[job]
	}{
		"context.Canceled":      {fmt.Errorf("db: %w", context.Canceled), nil},
		"backoff.Permanent":     {permanent, nil},
		"predicate says no":     {fatal, []middleware.RetryOption[job]{middleware.WithRetryable(func(err error) bool { return !errors.Is(err, fatal) })}},
		"permanent beats a yes": {permanent, []middleware.RetryOption[job]{middleware.WithRetryable(func(error) bool { return true })}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(c.err)
				err := retry(t, append(c.opts, constant(time.Second))...)(s.handle)(t.Context(), job{})
				require.Same(t, c.err, err, "returned as the handler returned it")
				require.Len(t, s.calls, 1)
			})
		})
	}
}

// A non-retryable error after retryable ones ends the retries, unchanged.
func TestRetryStopsAtAPermanentErrorLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fatal := backoff.Permanent(errors.New("fatal"))
		s := newScript(errTransient, fatal, nil)
		err := retry(t, constant(time.Second))(s.handle)(t.Context(), job{})
		require.Same(t, fatal, err)
		require.Len(t, s.calls, 2)
	})
}

func TestRetryAfterErrorSetsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(backoff.RetryAfter(7))
		require.NoError(t, retry(t, constant(time.Second))(s.handle)(t.Context(), job{}))
		require.Equal(t, []time.Duration{0, 7 * time.Second}, s.calls)
	})
}

// A cancellation of ctx during a wait ends it at once, with an error
// wrapping the cause and the last error.
func TestRetryWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		s := newScript(errTransient, errTransient)
		done := make(chan error, 1)
		go func() { done <- retry(t, constant(10*time.Minute))(s.handle)(ctx, job{}) }()
		synctest.Wait() // attempt 1 failed; the 10 minutes' wait began
		t0 := time.Now()
		cause := errors.New("shutting down")
		cancel(cause)
		err := <-done
		require.Zero(t, time.Since(t0), "no virtual time passed: the wait ended at once")
		require.ErrorIs(t, err, middleware.ErrRetryStopped)
		require.ErrorIs(t, err, cause)
		require.ErrorIs(t, err, errTransient)
		require.EqualError(t, err, "middleware: retry stopped by its context after attempt 1: shutting down; last error: transient failure")
		require.Len(t, s.calls, 1)
	})
}

// A failure once ctx ended is not retried, even when retryable.
func TestRetryNothingAfterItsContextEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		h := func(context.Context, job) error {
			calls++
			cancel()
			return errTransient
		}
		err := retry(t, constant(time.Second))(h)(ctx, job{})
		require.ErrorIs(t, err, middleware.ErrRetryStopped)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, errTransient)
		require.Equal(t, 1, calls)
	})
}

func TestRetryReportsEachFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e1, e2, e3 := errors.New("1"), errors.New("2"), errors.New("3")
		s := newScript(e1, e2, e3)
		var seen []middleware.Attempt
		hook := middleware.WithOnAttempt(func(_ context.Context, j job, a middleware.Attempt) {
			require.Equal(t, 7, j.seq, "the hook gets the exchange")
			seen = append(seen, a)
		})
		exp := middleware.WithBackOff(func() backoff.BackOff {
			return &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: time.Minute}
		})
		err := retry(t, exp, hook, middleware.WithMaxTries(3))(s.handle)(t.Context(), job{seq: 7})
		require.ErrorIs(t, err, middleware.ErrRetriesExhausted)
		require.Equal(t, []middleware.Attempt{
			{Number: 1, Err: e1, Next: time.Second},
			{Number: 2, Err: e2, Next: 2 * time.Second},
			{Number: 3, Err: e3, Next: backoff.Stop},
		}, seen)
		require.False(t, seen[0].Final())
		require.True(t, seen[2].Final())
	})
}

func TestRetryReportsANonRetryableFirstAttempt(t *testing.T) {
	var seen []middleware.Attempt
	hook := middleware.WithOnAttempt(func(_ context.Context, _ job, a middleware.Attempt) { seen = append(seen, a) })
	fatal := backoff.Permanent(errors.New("fatal"))
	err := retry(t, hook)(newScript(fatal).handle)(t.Context(), job{})
	require.Same(t, fatal, err)
	require.Equal(t, []middleware.Attempt{{Number: 1, Err: fatal, Next: backoff.Stop}}, seen)
}

// Each failing exchange gets a policy of its own; one that succeeds at
// once asks for none.
func TestRetryPolicyPerExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		made := 0
		policy := middleware.WithBackOff(func() backoff.BackOff {
			made++
			return &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: time.Minute}
		})
		f := newFlaky()
		h := retry(t, policy)(f.handle)
		for seq, fails := range []int{2, 0, 2} {
			t0 := time.Now()
			require.NoError(t, h(t.Context(), job{seq: seq, fails: fails}))
			if fails > 0 {
				require.Equal(t, 3*time.Second, time.Since(t0), "1 s then 2 s: a fresh policy, not the last one's state")
			}
		}
		require.Equal(t, 2, made)
	})
}

// A panic is not retried: it goes up to the caller (the dispatcher).
func TestRetryDoesNotRetryAPanic(t *testing.T) {
	calls := 0
	h := retry(t)(func(context.Context, job) error {
		calls++
		panic("boom")
	})
	require.PanicsWithValue(t, "boom", func() { _ = h(t.Context(), job{}) })
	require.Equal(t, 1, calls)
}

func TestRetryInvalidOptions(t *testing.T) {
	cases := map[string]middleware.RetryOption[job]{
		"Retry: nil backoff policy":               middleware.WithBackOff(nil),
		"Retry: max tries -1 is negative":         middleware.WithMaxTries(-1),
		"Retry: max elapsed time -1s is negative": middleware.WithMaxElapsedTime(-time.Second),
		"Retry: nil retryable predicate":          middleware.WithRetryable(nil),
		"Retry: nil attempt hook":                 middleware.WithOnAttempt[job](nil),
	}
	for want, opt := range cases {
		mw, err := middleware.Retry(middleware.RetryOption[job]{}, opt)
		require.Nil(t, mw)
		require.ErrorIs(t, err, middleware.ErrInvalidOption)
		require.EqualError(t, err, "middleware: invalid option: "+want)
	}
	_, err := middleware.Retry[job](middleware.WithMaxTries(-1), middleware.WithBackOff(nil))
	require.ErrorIs(t, err, middleware.ErrInvalidOption)
	require.ErrorContains(t, err, "max tries")
	require.ErrorContains(t, err, "nil backoff policy", "every invalid option is named")
}

// The predicate is asked once per failed attempt, so it may count.
func TestRetryAsksThePredicateOncePerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := 0
		pred := middleware.WithRetryable(func(error) bool { asked++; return true })
		s := newScript(errTransient, errTransient, errTransient)
		require.NoError(t, retry(t, pred, constant(time.Second))(s.handle)(t.Context(), job{}))
		require.Equal(t, 3, asked)
		asked = 0
		_ = retry(t, pred, middleware.WithMaxTries(2))(newScript(errTransient, errTransient).handle)(t.Context(), job{})
		require.Equal(t, 2, asked)
	})
}
