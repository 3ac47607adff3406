package flux

import (
	"context"

	"github.com/aggflow/aggflow/component"
)

// discardKey is the context key of the discard hook for items of type U; one
// key type per U, so hooks for different item types never collide.
type discardKey[U any] struct{}

// DoOnDiscard returns f with hook installed for the items of type U that
// the operators upstream of it drop after pulling them. U need not be
// f's item type: a hook for the source's items sees what a GroupBy or a
// PublishOn before a Map drops. The dropping operators are Filter (the
// items it rejects, ErrFiltered), GroupBy (group queues and the item the
// router holds), PublishOn (its queue), Buffer (a partial batch), FlatMap (an inner's item arriving after the end) and the
// time operators: DelayElements (the item waiting), Timeout (an item after
// the timeout), Sample (skipped items, ErrSkipped), BufferTimeout (a partial
// batch), Window and WindowTimeout (the items of an abandoned window). Each
// dropped item is given to hook once, with the reason: the cause of the
// subscription's context, the error that ended the flow, or ErrCancelled
// when the downstream stopped early. Items are never dropped silently while
// a hook is set; an item is either delivered downstream or discarded, never
// both. An inner DoOnDiscard for the same U takes precedence over an outer
// one; a nil hook returns f unchanged.
//
// Operators look the hook up once, when subscribed. The hook may run on any
// goroutine of the subscription, concurrently with itself for items of
// different groups, so it must be safe for concurrent use; a panic of it is
// recovered and ignored: the item is already gone. Costs one context value
// per subscription, nothing per item.
func DoOnDiscard[T, U any](f Flux[T], hook func(v U, reason error)) Flux[T] {
	if hook == nil {
		return f
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		return f.run(WithDiscard(ctx, hook), emit)
	}}
}

// WithDiscard returns ctx carrying hook as the discard hook for items of
// type U: DoOnDiscard for a subscriber that is not a Flux (a dispatcher
// subscribing a Flux as its source), so that what the Flux's operators drop
// is seen. A DoOnDiscard for U inside the Flux takes precedence. The rules
// of DoOnDiscard hold: hook must be safe for concurrent use, runs before
// Subscribe returns, and its panic is recovered and ignored. A nil hook
// returns ctx. Costs one context value.
func WithDiscard[U any](ctx context.Context, hook func(v U, reason error)) context.Context {
	if hook == nil {
		return ctx
	}
	return context.WithValue(ctx, discardKey[U]{}, hook)
}

// discarder returns the discard function for T of ctx: the hook guarded
// against panics, or a no-op.
func discarder[T any](ctx context.Context) func(T, error) {
	hook, _ := ctx.Value(discardKey[T]{}).(func(T, error))
	if hook == nil {
		return func(T, error) {}
	}
	return func(v T, reason error) {
		_ = component.Call(func() error { hook(v, reasonOf(reason)); return nil }, nil)
	}
}
