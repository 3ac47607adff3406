package flux

import (
	"context"
	"errors"
)

// StartWith emits vs, then the items of f: Concat(Just(vs...), f). The
// slice is read at each subscription, not copied.
func (f Flux[T]) StartWith(vs ...T) Flux[T] { return Concat(FromSlice(vs), f) }

// ConcatWith emits the items of f, then, once f completed, those of other:
// Concat(f, other).
func (f Flux[T]) ConcatWith(other Flux[T]) Flux[T] { return Concat(f, other) }

// MergeWith emits the items of f and other interleaved as they arrive:
// Merge(f, other), with its goroutines and costs.
func (f Flux[T]) MergeWith(other Flux[T]) Flux[T] { return Merge(f, other) }

// TakeWhile emits the items up to the first one for which pred returns
// false, then completes and cancels the upstream; that item goes to the
// discard hook with ErrFiltered. A panic in pred ends the flow with
// *PanicError and its item goes to the discard hook with that error. pred
// nil gives ErrInvalidArgument.
func (f Flux[T]) TakeWhile(pred func(T) bool) Flux[T] {
	if pred == nil {
		return Error[T](invalid("TakeWhile", "nil predicate"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard, stop := discarder[T](ctx), newStop()
		err := f.run(ctx, func(v T) error {
			keep, err := call1(pred, v)
			switch {
			case err != nil:
				discard(v, err)
				return err
			case !keep:
				discard(v, ErrFiltered)
				return stop
			}
			return emit(v)
		})
		if errors.Is(err, stop) {
			return nil
		}
		return err
	}}
}

// SkipWhile drops the items while pred returns true, giving them to the
// discard hook with ErrSkipped, and emits the first item for which it
// returns false and every item after it (pred is not called again). A
// panic in pred ends the flow with *PanicError and its item goes to the
// discard hook with that error. pred nil gives ErrInvalidArgument.
func (f Flux[T]) SkipWhile(pred func(T) bool) Flux[T] {
	if pred == nil {
		return Error[T](invalid("SkipWhile", "nil predicate"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard, skipping := discarder[T](ctx), true
		return f.run(ctx, func(v T) error {
			if skipping {
				skip, err := call1(pred, v)
				switch {
				case err != nil:
					discard(v, err)
					return err
				case skip:
					discard(v, ErrSkipped)
					return nil
				}
				skipping = false
			}
			return emit(v)
		})
	}}
}

// TakeLast emits, once f completed, its last n items (all of them if
// fewer), in order, then completes. The items pushed out of the window by
// later ones go to the discard hook with ErrSkipped, and the window held
// when the flow fails or is cancelled with the reason; so do the items not
// yet emitted when the downstream fails while the window is emitted. Holds
// n items (a ring allocated at the first item); TakeLast(0) drops every
// item (ErrSkipped). n < 0 gives ErrInvalidArgument.
func (f Flux[T]) TakeLast(n int) Flux[T] {
	if n < 0 {
		return Error[T](invalid("TakeLast", "negative count"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var w lastN[T]
		err := f.run(ctx, func(v T) error {
			if old, out := w.push(n, v); out {
				discard(old, ErrSkipped)
			}
			return nil
		})
		held := w.items()
		if err != nil {
			discardAll(discard, held, err)
			return err
		}
		return emitAll(emit, discard, held)
	}}
}

// SkipLast emits the items of f but the last n: each item is emitted once
// n later ones arrived, so the downstream runs n items behind the
// upstream. The n items held at completion go to the discard hook with
// ErrSkipped, and those held when the flow fails or is cancelled with the
// reason. Holds n items (a ring allocated at the first item); SkipLast(0)
// is f. n < 0 gives ErrInvalidArgument.
func (f Flux[T]) SkipLast(n int) Flux[T] {
	switch {
	case n < 0:
		return Error[T](invalid("SkipLast", "negative count"))
	case n == 0:
		return f
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var w lastN[T]
		err := f.run(ctx, func(v T) error {
			if old, out := w.push(n, v); out {
				return emit(old)
			}
			return nil
		})
		reason := err
		if err == nil {
			reason = ErrSkipped
		}
		discardAll(discard, w.items(), reason)
		return err
	}}
}

// lastN is the last n items of a flow, in a ring allocated at the first
// push.
type lastN[T any] struct {
	ring  []T
	start int // index of the oldest item once the ring is full
	full  bool
}

// push adds v to a window of n items; once it is full, the oldest item
// leaves it and is returned (out). With n = 0, v itself is out.
func (w *lastN[T]) push(n int, v T) (old T, out bool) {
	switch {
	case n == 0:
		return v, true
	case !w.full:
		if w.ring == nil {
			w.ring = make([]T, 0, n)
		}
		w.ring = append(w.ring, v)
		w.full = len(w.ring) == n
		return old, false
	}
	old = w.ring[w.start]
	w.ring[w.start] = v
	w.start = (w.start + 1) % n
	return old, true
}

// items returns the window's items, oldest first.
func (w *lastN[T]) items() []T {
	if w.start == 0 {
		return w.ring
	}
	return append(w.ring[w.start:len(w.ring):len(w.ring)], w.ring[:w.start]...)
}

// emitAll emits vs in order; when the downstream fails, the items not
// emitted go to discard with its error.
func emitAll[T any](emit func(T) error, discard func(T, error), vs []T) error {
	for i, v := range vs {
		if err := emit(v); err != nil {
			discardAll(discard, vs[i+1:], err)
			return err
		}
	}
	return nil
}

// discardAll gives each of vs to discard with reason.
func discardAll[T any](discard func(T, error), vs []T, reason error) {
	for _, v := range vs {
		discard(v, reason)
	}
}

// BufferUntil emits the items in slices each closed by an item for which
// pred returns true: that item ends its slice, or, with cutBefore, starts
// the next one. At completion the partial slice, if any; no empty slice
// is emitted. Each slice is new and owned by the receiver. On an error or
// cancellation the partial slice goes to the discard hook with the
// reason; a panic in pred ends the flow with *PanicError, the partial
// slice and the item going to the discard hook with it. pred nil gives
// ErrInvalidArgument.
func BufferUntil[T any](f Flux[T], pred func(T) bool, cutBefore bool) Flux[[]T] {
	if pred == nil {
		return Error[[]T](invalid("BufferUntil", "nil predicate"))
	}
	return bufferBy(f, pred, func(match bool) (cut, keep, before bool) {
		return match, true, cutBefore
	})
}

// BufferWhile emits the runs of consecutive items for which pred returns
// true, as slices: an item for which it returns false ends the run (its
// slice is emitted, unless empty) and goes to the discard hook with
// ErrFiltered. At completion the partial slice, if any. Each slice is new
// and owned by the receiver. On an error or cancellation the partial
// slice goes to the discard hook with the reason; a panic in pred ends
// the flow with *PanicError, the partial slice and the item going to the
// discard hook with it. pred nil gives ErrInvalidArgument.
func BufferWhile[T any](f Flux[T], pred func(T) bool) Flux[[]T] {
	if pred == nil {
		return Error[[]T](invalid("BufferWhile", "nil predicate"))
	}
	return bufferBy(f, pred, func(match bool) (cut, keep, before bool) {
		return !match, match, false
	})
}

// bufferBy is BufferUntil and BufferWhile: rule says, from pred's answer
// for an item v, whether the slice is cut, whether v is kept (else it is
// discarded with ErrFiltered), and whether the cut comes before v (v then
// starts the next slice).
func bufferBy[T any](f Flux[T], pred func(T) bool, rule func(match bool) (cut, keep, before bool)) Flux[[]T] {
	return Flux[[]T]{subscribe: func(ctx context.Context, emit func([]T) error) error {
		discard := discarder[T](ctx)
		var buf []T
		flush := func() error {
			if len(buf) == 0 {
				return nil
			}
			out := buf
			buf = nil
			return emit(out)
		}
		err := f.run(ctx, func(v T) error {
			match, err := call1(pred, v)
			if err != nil {
				discard(v, err)
				return err
			}
			cut, keep, before := rule(match)
			if cut && before {
				if err := flush(); err != nil {
					discard(v, err)
					return err
				}
			}
			if !keep {
				discard(v, ErrFiltered)
			} else {
				buf = append(buf, v)
			}
			if cut && !before {
				return flush()
			}
			return nil
		})
		if err == nil {
			return flush()
		}
		discardAll(discard, buf, err)
		return err
	}}
}
