package flux

import "context"

// discardKey is the context key of the discard hook for items of type T; one
// key type per T, so hooks for different element types never collide.
type discardKey[T any] struct{}

// WithDiscardHook returns a copy of ctx carrying hook, Reactor's
// Flux#doOnDiscard (Hooks / Operators.onDiscard in Operators.java). Every
// operator of a subscription made with that ctx that drops items of type T
// it had already pulled calls hook once per dropped item, with the reason:
// the cause of ctx, the error that ended the flow, or ErrCancelled when the
// downstream stopped early. The dropping operators are GroupBy (group queues
// and the item the router holds), PublishOn (its queue) and Buffer (a
// partial batch). Items are never dropped silently while a hook is set; an
// item is either delivered downstream or discarded, never both.
//
// Operators look the hook up once, when subscribed. The hook may run on any
// goroutine of the subscription, concurrently with itself for items of
// different groups, so it must be safe for concurrent use. A panic in the
// hook is recovered and ignored: the item is already gone.
func WithDiscardHook[T any](ctx context.Context, hook func(v T, reason error)) context.Context {
	return context.WithValue(ctx, discardKey[T]{}, hook)
}

// DoOnDiscard returns f with hook installed for the items of type U that
// the operators upstream of it drop after pulling them: Reactor's
// doOnDiscard(Class<U>, Consumer<U>). U need not be f's item type: a hook
// for the source's items sees what a GroupBy or a PublishOn before a Map
// drops. Each dropped item is given to hook once, with the reason: the
// cause of the subscription's context, the error that ended the flow, or
// ErrCancelled when the downstream stopped early. An inner DoOnDiscard for
// the same U takes precedence over an outer one. The hook may run on any
// goroutine of the subscription, concurrently with itself, so it must be
// safe for concurrent use; a panic of it is recovered and ignored. Costs one
// context value per subscription, nothing per item.
func DoOnDiscard[T, U any](f Flux[T], hook func(v U, reason error)) Flux[T] {
	if hook == nil {
		return f
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		return f.run(context.WithValue(ctx, discardKey[U]{}, hook), emit)
	}}
}

// discarder returns the discard function for T of ctx: the hook guarded
// against panics, or a no-op.
func discarder[T any](ctx context.Context) func(T, error) {
	hook, _ := ctx.Value(discardKey[T]{}).(func(T, error))
	if hook == nil {
		return func(T, error) {}
	}
	return func(v T, reason error) {
		defer func() { _ = recover() }()
		hook(v, reasonOf(reason))
	}
}
