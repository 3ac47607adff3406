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
