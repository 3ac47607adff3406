package middleware

import (
	"context"
	"fmt"

	"github.com/aggflow/aggflow/dispatch"
)

// Middleware wraps a handler in another, which decides when and how often
// the inner one is called for one exchange. Whatever a middleware does runs
// inside the one handler call the dispatcher makes for the exchange, so the
// group's order holds for free (see the package documentation). A
// middleware of this package given a nil handler returns a handler that
// fails every exchange with ErrInvalidArgument.
type Middleware[T any] func(dispatch.Handler[T]) dispatch.Handler[T]

// Chain returns h wrapped in mws, the first listed outermost: Chain(h, a, b)
// is a(b(h)), so a call enters a, then b, then h. Put DeadLetter first (it
// sees the final failure), then a Timeout for the whole exchange if any, then
// Retry, then a Timeout per attempt:
//
//	Chain(h, deadLetter, retry, perAttempt)
//
// Chain never returns nil: a nil h, a nil middleware or a middleware that
// returns nil gives a handler that fails every exchange with
// ErrInvalidArgument naming the position, so a mistake (a constructor's
// error ignored) shows in every outcome rather than as a panic. Chain costs
// one call per middleware per exchange, nothing when mws is empty.
func Chain[T any](h dispatch.Handler[T], mws ...Middleware[T]) dispatch.Handler[T] {
	if h == nil {
		return invalid[T]("Chain: nil handler")
	}
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] == nil {
			return invalid[T](fmt.Sprintf("Chain: nil middleware at position %d", i))
		}
		if h = mws[i](h); h == nil {
			return invalid[T](fmt.Sprintf("Chain: middleware at position %d returned a nil handler", i))
		}
	}
	return h
}

// invalid returns a handler that fails every exchange with
// ErrInvalidArgument and what.
func invalid[T any](what string) dispatch.Handler[T] {
	err := fmt.Errorf("%w: %s", ErrInvalidArgument, what)
	return func(context.Context, T) error { return err }
}

// wrap returns the middleware that applies around to a non-nil handler, and
// fails every exchange of a nil one with ErrInvalidArgument naming name.
func wrap[T any](name string, around func(dispatch.Handler[T]) dispatch.Handler[T]) Middleware[T] {
	return func(h dispatch.Handler[T]) dispatch.Handler[T] {
		if h == nil {
			return invalid[T](name + ": nil handler")
		}
		return around(h)
	}
}
