package flux

import "context"

// DefaultIfEmpty emits v when the upstream completes without an item; an
// error or a cancellation passes as it is. Fused.
func (f Flux[T]) DefaultIfEmpty(v T) Flux[T] { return f.SwitchIfEmpty(Just(v)) }

// SwitchIfEmpty subscribes other, on the same goroutine, when the upstream
// completes without an item, and emits its items and its end instead; an
// error or a cancellation passes as it is. Fused: one flag per
// subscription.
func (f Flux[T]) SwitchIfEmpty(other Flux[T]) Flux[T] {
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		empty := true
		err := f.run(ctx, func(v T) error {
			empty = false
			return emit(v)
		})
		if err != nil || !empty {
			return err
		}
		return other.run(ctx, emit)
	}}
}
