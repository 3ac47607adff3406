package flux

import (
	"context"
	"slices"
)

// HasElements emits true once f emitted an item, cancelling f, or false
// when f completes empty; the item pulled goes to the discard hook with
// ErrSkipped.
func (f Flux[T]) HasElements() Mono[bool] {
	return f.matches("HasElements", func(T) bool { return true }, true, true)
}

// Any emits true at the first item for which pred returns true, cancelling
// f, or false when f completes without one. The items are consumed by pred,
// not discarded.
func (f Flux[T]) Any(pred func(T) bool) Mono[bool] { return f.matches("Any", pred, true, false) }

// Every emits false at the first item for which pred returns false,
// cancelling f, or true when f completes without one (true for an empty f).
// The items are consumed by pred, not discarded.
func (f Flux[T]) Every(pred func(T) bool) Mono[bool] {
	if pred == nil {
		return MonoError[bool](invalid("Every", "nil predicate"))
	}
	return f.matches("Every", func(v T) bool { return !pred(v) }, false, false)
}

// matches emits found at the first item hit accepts, else !found at the
// end; discard: the item that decided goes to the discard hook.
func (f Flux[T]) matches(op string, hit func(T) bool, found, discard bool) Mono[bool] {
	if hit == nil {
		return MonoError[bool](invalid(op, "nil predicate"))
	}
	return Mono[bool]{Flux[bool]{subscribe: func(ctx context.Context, emit func(bool) error) error {
		drop := discarder[T](ctx)
		stop := newStop()
		err := f.run(ctx, func(v T) error {
			ok, err := call1(hit, v)
			switch {
			case err != nil:
				return err
			case !ok:
				return nil
			case discard:
				drop(v, ErrSkipped)
			}
			return stop
		})
		switch {
		case err == stop:
			return emit(found)
		case err != nil:
			return err
		}
		return emit(!found)
	}}}
}

// CollectMap emits, once f completed, a new map of key(v) to val(v) for its
// items; a later item of a key replaces the earlier one. On an error the
// values gathered go to the discard hook. Panics in key or val end the flow
// with *PanicError.
func CollectMap[T any, K comparable, V any](f Flux[T], key func(T) K, val func(T) V) Mono[map[K]V] {
	if key == nil || val == nil {
		return MonoError[map[K]V](invalid("CollectMap", "nil function"))
	}
	return gather(f, func() map[K]V { return map[K]V{} }, func(m map[K]V, v T) (map[K]V, error) {
		k, err := call1(key, v)
		if err != nil {
			return m, err
		}
		if m[k], err = call1(val, v); err != nil {
			delete(m, k)
		}
		return m, err
	}, func(ctx context.Context, m map[K]V, err error) {
		discard := discarder[V](ctx)
		for _, v := range m {
			discard(v, err)
		}
	})
}

// CollectMultimap emits, once f completed, a new map of key(v) to the
// val(v) of every item of that key, in arrival order. On an error the
// values gathered go to the discard hook.
func CollectMultimap[T any, K comparable, V any](f Flux[T], key func(T) K, val func(T) V) Mono[map[K][]V] {
	if key == nil || val == nil {
		return MonoError[map[K][]V](invalid("CollectMultimap", "nil function"))
	}
	return gather(f, func() map[K][]V { return map[K][]V{} }, func(m map[K][]V, v T) (map[K][]V, error) {
		k, err := call1(key, v)
		if err != nil {
			return m, err
		}
		x, err := call1(val, v)
		if err == nil {
			m[k] = append(m[k], x)
		}
		return m, err
	}, func(ctx context.Context, m map[K][]V, err error) {
		discard := discarder[V](ctx)
		for _, vs := range m {
			for _, v := range vs {
				discard(v, err)
			}
		}
	})
}

// CollectSorted emits, once f completed, its items in a new slice sorted by
// cmp (negative: a before b), stably: equal items keep their arrival order.
// On an error the items gathered go to the discard hook; a panic in cmp
// ends the flow with *PanicError. Costs O(n log n) comparisons at the end.
func CollectSorted[T any](f Flux[T], cmp func(a, b T) int) Mono[[]T] {
	if cmp == nil {
		return MonoError[[]T](invalid("CollectSorted", "nil comparator"))
	}
	return Mono[[]T]{Flux[[]T]{subscribe: func(ctx context.Context, emit func([]T) error) error {
		sorted, _, err := CollectList(f).Block(ctx)
		if err != nil {
			return err
		}
		if err := call0(func() { slices.SortStableFunc(sorted, cmp) }); err != nil {
			return err
		}
		return emit(sorted)
	}}}
}

// gather folds f into a container made by start with add, emitting it once
// f completed; drop discards its contents when the flow fails.
func gather[T, C any](f Flux[T], start func() C, add func(C, T) (C, error), drop func(context.Context, C, error)) Mono[C] {
	return Mono[C]{Flux[C]{subscribe: func(ctx context.Context, emit func(C) error) error {
		c := start()
		err := f.run(ctx, func(v T) (err error) {
			c, err = add(c, v)
			return err
		})
		if err != nil {
			drop(ctx, c, err)
			return err
		}
		return emit(c)
	}}}
}
