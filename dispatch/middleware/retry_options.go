package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// RetryOption configures Retry for exchanges of type T. Knobs, the options
// that do not involve T (WithBackOff, WithMaxTries, WithMaxElapsedTime,
// WithRetryable), are RetryKnob values, which every RetryOption[T]
// accepts, so they take no type argument; WithOnAttempt is an Option of the
// type its hook takes, so a hook of another type does not compile. The zero
// RetryOption is ignored; an invalid one makes Retry return an error
// wrapping ErrInvalidOption.
type RetryOption[T any] struct{ apply func(retryConfigurable) }

// RetryKnob is a RetryOption of every exchange type: a RetryKnob value is
// assignable to RetryOption[T] for any T. A hook converted to a RetryKnob
// loses its compile-time check; Retry then refuses it with ErrInvalidOption.
type RetryKnob = struct{ apply func(retryConfigurable) }

type retryConfigurable interface{ knobs() *retrySettings }

// retrySettings are the knobs: what the options set that does not involve T.
type retrySettings struct {
	newBackOff func() backoff.BackOff
	maxTries   uint
	maxElapsed time.Duration
	retryable  func(error) bool
	invalid    []error
}

type retryConfig[T any] struct {
	retrySettings
	onAttempt func(context.Context, T, Attempt)
}

func (c *retryConfig[T]) knobs() *retrySettings { return &c.retrySettings }

func newRetryConfig[T any](opts []RetryOption[T]) retryConfig[T] {
	c := retryConfig[T]{retrySettings: retrySettings{
		newBackOff: func() backoff.BackOff { return backoff.NewExponentialBackOff() },
		maxElapsed: backoff.DefaultMaxElapsedTime,
		retryable:  notCancelled,
	}}
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&c)
		}
	}
	return c
}

// retryKnob makes the RetryKnob that applies set.
func retryKnob(set func(*retrySettings)) RetryKnob {
	return RetryKnob{func(c retryConfigurable) { set(c.knobs()) }}
}

func (c *retrySettings) reject(format string, args ...any) {
	c.invalid = append(c.invalid, fmt.Errorf("%w: Retry: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// notCancelled is the default retryable predicate: every error but a
// context's cancellation.
func notCancelled(err error) bool { return !errors.Is(err, context.Canceled) }

// Attempt describes one failed attempt of a retried handler, for logs and
// metrics.
type Attempt struct {
	// Number counts the handler's calls for this exchange: 1 for the first.
	Number int
	// Err is what the handler returned.
	Err error
	// Next is the wait before the next attempt, or backoff.Stop when no
	// attempt follows (Final).
	Next time.Duration
}

// Final reports whether no attempt follows this one.
func (a Attempt) Final() bool { return a.Next == backoff.Stop }

// WithBackOff sets the backoff policy: newPolicy is called once per
// exchange whose first attempt failed, and the policy it returns serves that
// exchange's waits only (policies such as backoff.ExponentialBackOff keep
// state and are not safe for concurrent use, while groups retry
// concurrently). Default: backoff.NewExponentialBackOff (0.5 s, x1.5 per
// attempt up to 60 s, randomised by ±50%). A policy's backoff.Stop ends the
// retries (ErrRetriesExhausted). nil is invalid.
func WithBackOff(newPolicy func() backoff.BackOff) RetryKnob {
	return retryKnob(func(c *retrySettings) {
		if newPolicy == nil {
			c.reject("nil backoff policy")
		}
		c.newBackOff = newPolicy
	})
}

// WithMaxTries bounds the handler's calls per exchange, the first included:
// 1 never retries. 0 (the default) sets no bound; below 0 is invalid.
func WithMaxTries(n int) RetryKnob {
	return retryKnob(func(c *retrySettings) {
		if n < 0 {
			c.reject("max tries %d is negative", n)
			return
		}
		c.maxTries = uint(n)
	})
}

// WithMaxElapsedTime bounds the time spent retrying, from the first
// attempt's failure: no wait is started that would end more than d after
// it (the first attempt's own duration is not counted). Default
// backoff.DefaultMaxElapsedTime (15 minutes); 0 sets no bound; below 0 is
// invalid. With no bound on tries or time, and a policy that never stops, an
// exchange is retried until the handler's ctx ends (a ForceStop).
func WithMaxElapsedTime(d time.Duration) RetryKnob {
	return retryKnob(func(c *retrySettings) {
		if d < 0 {
			c.reject("max elapsed time %v is negative", d)
		}
		c.maxElapsed = d
	})
}

// WithRetryable sets which errors are retried (default: all but those
// wrapping context.Canceled). Whatever it says, an error wrapping a
// *backoff.PermanentError (backoff.Permanent) is never retried, and nothing
// is once the handler's ctx ended. It is called once per failed attempt,
// on the handler's goroutine; nil is invalid.
func WithRetryable(retryable func(err error) bool) RetryKnob {
	return retryKnob(func(c *retrySettings) {
		if retryable == nil {
			c.reject("nil retryable predicate")
		}
		c.retryable = retryable
	})
}

// WithOnAttempt sets a hook called once after each failed attempt, on the
// handler's goroutine, before the wait that follows (Next) or with Next
// backoff.Stop when none follows: the place for logs and metrics. A wait cut
// short by the handler's ctx is not reported again. It runs inside the
// exchange's handler call, so it delays the group; its panic is the
// handler's. nil is invalid.
func WithOnAttempt[T any](hook func(ctx context.Context, exchange T, a Attempt)) RetryOption[T] {
	return RetryOption[T]{func(rc retryConfigurable) {
		c, ok := rc.(*retryConfig[T])
		switch {
		case !ok:
			rc.knobs().reject("WithOnAttempt takes %s exchanges, given to a Retry of another type", fmt.Sprintf("%T", (*T)(nil))[1:])
		case hook == nil:
			c.reject("nil attempt hook")
		}
		if ok {
			c.onAttempt = hook
		}
	}}
}
