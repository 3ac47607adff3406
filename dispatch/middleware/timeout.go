package middleware

import (
	"context"
	"fmt"
	"time"

	"github.com/aggflow/aggflow/dispatch"
)

// Timeout returns a middleware that calls the handler with a context whose
// deadline is d from the call: inside Retry each attempt gets its own d,
// outside (or without) Retry the whole exchange does, waits included.
//
// The deadline is a request, not a preemption: the handler runs on the
// caller's goroutine and Go cannot stop it, so a handler that ignores its
// ctx runs to its end, keeping its group waiting. A handler that returns nil
// has succeeded, late or not. One that fails once the deadline passed
// returns an error wrapping ErrTimeout and context.DeadlineExceeded (and its
// own error, unless that was just the context's), so errors.Is works for
// all three; Retry retries it by default. A deadline of ctx that comes
// sooner, or a cancellation of ctx, is not this middleware's: those errors
// pass unchanged.
//
// A d that is not positive returns ErrInvalidOption. Cost per call: one
// context with a timer (context.WithTimeoutCause), 4 allocations (272 B)
// and about 400 ns on the project's machine.
func Timeout[T any](d time.Duration) (Middleware[T], error) {
	if d <= 0 {
		return nil, fmt.Errorf("%w: Timeout: duration %v is not positive", ErrInvalidOption, d)
	}
	cause := fmt.Errorf("%w after %v: %w", ErrTimeout, d, context.DeadlineExceeded)
	return wrap("Timeout", func(h dispatch.Handler[T]) dispatch.Handler[T] {
		return func(ctx context.Context, x T) error {
			tctx, cancel := context.WithTimeoutCause(ctx, d, cause)
			defer cancel()
			err := h(tctx, x)
			switch {
			case err == nil || context.Cause(tctx) != cause:
				return err
			case err == tctx.Err() || err == cause:
				return cause
			}
			return fmt.Errorf("%w: %w", cause, err)
		}
	}), nil
}
