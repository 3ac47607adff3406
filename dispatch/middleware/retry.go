package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/aggflow/aggflow/dispatch"
)

// Retry returns a middleware that calls the handler again, after a backoff
// wait, while it fails with a retryable error, inside one handler call
// with backoff.Retry
// (github.com/cenkalti/backoff/v5). All attempts of an exchange and the
// waits between them happen before the handler call returns, so the next
// exchange of the group starts only after the last attempt of this one: the
// group's order is kept (the package documentation says why and what it
// costs).
//
// Options: WithBackOff (the policy, default exponential from 0.5 s),
// WithMaxTries (default no bound), WithMaxElapsedTime (default 15 minutes),
// WithRetryable (default: all errors but context.Canceled; never
// backoff.Permanent ones) and WithOnAttempt (a hook per failed attempt). A
// handler error wrapping a *backoff.RetryAfterError sets the next wait
// itself, as backoff.Retry does.
//
// The wait ends at once when the handler's ctx ends: a ForceStop cancels
// that ctx, so it interrupts a backoff wait without waiting it out. A
// graceful stop does not cancel it: the retries go on within the stop's
// deadline.
//
// The handler returns nil once an attempt succeeds; otherwise:
//   - a non-retryable error, unchanged (as the handler returned it, a
//     backoff.Permanent wrapper included);
//   - once the ctx ended, an error wrapping ErrRetryStopped,
//     context.Cause(ctx) (for a force stop dispatch.ErrForceStopped) and the
//     last attempt's error;
//   - once retries ran out, an error wrapping ErrRetriesExhausted and the
//     last attempt's error.
//
// A panic is not retried: it goes up through Retry, and the dispatcher
// recovers it into *component.PanicError (so does a panic of a policy,
// predicate or hook, all called on the handler's goroutine).
//
// An invalid option returns an error wrapping ErrInvalidOption. Cost: an
// exchange whose first attempt succeeds costs one call and no allocation
// (about 8 ns); one retry, waits aside, about 1.4 µs and 12 allocations
// (its policy and backoff.Retry's state, under 600 bytes).
func Retry[T any](opts ...RetryOption[T]) (Middleware[T], error) {
	c := newRetryConfig(opts)
	if len(c.invalid) > 0 {
		return nil, errors.Join(c.invalid...)
	}
	return wrap("Retry", func(h dispatch.Handler[T]) dispatch.Handler[T] {
		r := &retrier[T]{retryConfig: c, h: h}
		return r.handle
	}), nil
}

// retrier is Retry around one handler; it is shared by every call and
// holds no per-call state.
type retrier[T any] struct {
	retryConfig[T]
	h dispatch.Handler[T]
}

// handle makes the first attempt inline and leaves the rest to again: an
// exchange that succeeds at once pays for no retry machinery.
func (r *retrier[T]) handle(ctx context.Context, x T) error {
	err := r.h(ctx, x)
	if err == nil {
		return nil
	}
	a := &attempts[T]{retrier: r, ctx: ctx, x: x, n: 1, replay: true}
	a.failed(err)
	return a.again()
}

// isRetryable reports whether err may be retried: never a
// backoff.Permanent one (backoff.Retry's own rule, kept so that the
// outcome's classification agrees with it), else as the predicate says.
func (r *retrier[T]) isRetryable(err error) bool {
	var permanent *backoff.PermanentError
	return !errors.As(err, &permanent) && r.retryable(err)
}

// attempts is the state of one exchange's retries.
type attempts[T any] struct {
	*retrier[T]
	ctx       context.Context
	x         T
	n         int   // attempts made
	last      error // the error of attempt n
	permanent bool  // last may not be retried
	told      int   // the last attempt the hook was told of
	replay    bool  // backoff.Retry's first operation call replays attempt 1
}

// failed records the error of attempt n, asking the predicate once.
func (a *attempts[T]) failed(err error) {
	a.last, a.permanent = err, !a.isRetryable(err)
}

// again runs the retries after a failed first attempt and returns the
// exchange's error (nil once an attempt succeeded).
func (a *attempts[T]) again() error {
	if !a.permanent && a.ctx.Err() == nil && a.maxTries != 1 {
		// backoff.Retry's clock starts here, at the first failure; the
		// option is always passed, since leaving it out means 15 minutes.
		_, err := backoff.Retry(a.ctx, a.attempt,
			backoff.WithBackOff(a.newBackOff()),
			backoff.WithMaxTries(a.maxTries),
			backoff.WithMaxElapsedTime(a.maxElapsed),
			backoff.WithNotify(func(_ error, next time.Duration) { a.tell(next) }))
		if err == nil {
			return nil
		}
	}
	if a.told != a.n {
		a.tell(backoff.Stop)
	}
	switch {
	case a.permanent:
		return a.last
	case a.ctx.Err() != nil:
		return fmt.Errorf("%w after attempt %d: %w; last error: %w", ErrRetryStopped, a.n, context.Cause(a.ctx), a.last)
	}
	return fmt.Errorf("%w after attempt %d: %w", ErrRetriesExhausted, a.n, a.last)
}

// attempt is backoff.Retry's operation: its first call gives back attempt
// 1, made already; each later call is one more handler call. An error
// that may not be retried goes back as backoff.Permanent, which ends
// backoff.Retry (and is unwrapped by it: a.last keeps the handler's error).
func (a *attempts[T]) attempt() (struct{}, error) {
	if a.replay {
		a.replay = false
	} else {
		a.n++
		err := a.h(a.ctx, a.x)
		if err == nil {
			return struct{}{}, nil
		}
		a.failed(err)
	}
	if a.permanent {
		return struct{}{}, backoff.Permanent(a.last)
	}
	return struct{}{}, a.last
}

// tell gives the attempt hook, if any, the outcome of attempt n.
func (a *attempts[T]) tell(next time.Duration) {
	a.told = a.n
	if a.onAttempt != nil {
		a.onAttempt(a.ctx, a.x, Attempt{Number: a.n, Err: a.last, Next: next})
	}
}
