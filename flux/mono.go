package flux

import (
	"context"
	"fmt"
	"github.com/aggflow/aggflow/component"
	"sync"
	"time"
)

// Mono is a cold sequence of at most one item followed by completion or an
// error. As a Flux it is a recipe, run afresh by each subscription;
// m.Flux() is the same sequence as a Flux, for every Flux operator and
// terminal. The zero Mono is empty.
//
// Mono constructors and operators are package functions prefixed Mono
// where they change the item type (MonoMap, MonoFlatMap, MonoZip) and
// methods where they do not (DefaultIfEmpty, Timeout, Retry, Block). Flux
// operators that reduce to one item (Next, Last, Single, ElementAt, Count,
// CollectList, ...) return a Mono. A Mono value is immutable and safe to
// share.
type Mono[T any] struct{ f Flux[T] }

// Flux returns m as a Flux of zero or one item. Free: no copy, no wrapper.
func (m Mono[T]) Flux() Flux[T] { return m.f }

// MonoJust emits v, then completes.
func MonoJust[T any](v T) Mono[T] { return Mono[T]{Just(v)} }

// MonoEmpty completes without an item; so does the zero Mono.
func MonoEmpty[T any]() Mono[T] { return Mono[T]{} }

// MonoError fails at once with err (nil: ErrInvalidArgument).
func MonoError[T any](err error) Mono[T] { return Mono[T]{Error[T](err)} }

// MonoFromFunc calls fn at each subscription, on the subscribing goroutine,
// and emits its value or fails with its error; a panic becomes *PanicError.
// It always emits a value: for an empty result, use MonoEmpty or Filter.
// fn nil gives ErrInvalidArgument.
func MonoFromFunc[T any](fn func() (T, error)) Mono[T] {
	if fn == nil {
		return MonoError[T](invalid("MonoFromFunc", "nil function"))
	}
	return Mono[T]{Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		if err := ctxDone(ctx); err != nil {
			return err
		}
		v, err := callFunc(fn)
		if err != nil {
			return err
		}
		return emit(v)
	}}}
}

func callFunc[T any](fn func() (T, error)) (v T, err error) {
	defer component.Catch(&err)
	return fn()
}

// MonoMap emits fn(v) for the item v; a panic in fn ends the flow with
// *PanicError. Fused.
func MonoMap[T, R any](m Mono[T], fn func(T) R) Mono[R] { return Mono[R]{Map(m.f, fn)} }

// MonoFlatMap subscribes the Mono fn returns for the item, on the same
// goroutine, and emits its item and its end.
func MonoFlatMap[T, R any](m Mono[T], fn func(T) Mono[R]) Mono[R] {
	if fn == nil {
		return MonoError[R](invalid("MonoFlatMap", "nil function"))
	}
	return Mono[R]{ConcatMap(m.f, func(v T) Flux[R] { return fn(v).f })}
}

// MonoFlatMapMany subscribes the Flux fn returns for the item, on the same
// goroutine, and emits its items and its end.
func MonoFlatMapMany[T, R any](m Mono[T], fn func(T) Flux[R]) Flux[R] { return ConcatMap(m.f, fn) }

// errZipEmpty ends the other side of a MonoZip once one side completed
// empty.
var errZipEmpty = newStop()

// MonoZip subscribes a and b at once, b on a goroutine of its own and a on
// the subscribing one, and emits fn of their items once both have one: an
// error of either, or either completing empty, cancels the other and ends
// the Mono with that error, or empty; the value of the other side, if it
// had one, goes to the discard hook with the error (ErrCancelled for an
// empty side). The goroutine has exited when the subscription returns. A
// panic in fn ends it with *PanicError. fn nil gives ErrInvalidArgument.
func MonoZip[A, B, R any](a Mono[A], b Mono[B], fn func(A, B) R) Mono[R] {
	if fn == nil {
		return MonoError[R](invalid("MonoZip", "nil function"))
	}
	return Mono[R]{Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var (
			mu    sync.Mutex
			first error
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
				cancel(err)
			}
		}
		var av A
		var bv B
		var aok, bok bool
		done := make(chan struct{})
		component.Go(func() error {
			return runCaught(b.f, ctx, func(v B) error { bv, bok = v, true; return nil })
		}, func(err error) {
			defer close(done)
			if err = exitedAs("MonoZip", err); err == nil && !bok {
				err = errZipEmpty
			}
			if err != nil {
				fail(err)
			}
		})
		err := runCaught(a.f, ctx, func(v A) error { av, aok = v, true; return nil })
		if err == nil && !aok {
			err = errZipEmpty
		}
		if err != nil {
			fail(err)
		}
		<-done
		if first != nil {
			// A value pulled and not combined is dropped.
			if aok {
				discarder[A](ctx)(av, first)
			}
			if bok {
				discarder[B](ctx)(bv, first)
			}
			if first == errZipEmpty {
				return nil
			}
			return first
		}
		r, err := call2(fn, av, bv)
		if err != nil {
			return err
		}
		return emit(r)
	}}}
}

// Then ignores the items of f and, once f completed, subscribes next and
// emits its item and end; f's error is the Mono's. The ignored items go to
// the discard hook with ErrSkipped. Fused: next runs on the goroutine f
// completed on.
func Then[T, V any](f Flux[T], next Mono[V]) Mono[V] {
	return Mono[V]{Flux[V]{subscribe: func(ctx context.Context, emit func(V) error) error {
		if err := f.IgnoreElements().f.run(ctx, func(T) error { return nil }); err != nil {
			return err
		}
		return next.f.run(ctx, emit)
	}}}
}

// ThenReturn is Then(f, MonoJust(v)).
func ThenReturn[T, V any](f Flux[T], v V) Mono[V] { return Then(f, MonoJust(v)) }

// DefaultIfEmpty emits v when m completes empty.
func (m Mono[T]) DefaultIfEmpty(v T) Mono[T] { return Mono[T]{m.f.DefaultIfEmpty(v)} }

// SwitchIfEmpty subscribes other when m completes empty.
func (m Mono[T]) SwitchIfEmpty(other Mono[T]) Mono[T] { return Mono[T]{m.f.SwitchIfEmpty(other.f)} }

// Filter keeps the item if pred returns true, and otherwise gives it to the
// discard hook with ErrFiltered and completes empty.
func (m Mono[T]) Filter(pred func(T) bool) Mono[T] { return Mono[T]{m.f.Filter(pred)} }

// Timeout fails with an error wrapping ErrTimeout when neither the item nor
// the end arrived within d of the subscription (Flux's Timeout; every Mono
// ends with its item).
func (m Mono[T]) Timeout(d time.Duration) Mono[T] { return Mono[T]{m.f.Timeout(d)} }

// Retry subscribes m again, up to n times, when it fails (Flux's Retry).
func (m Mono[T]) Retry(n int) Mono[T] { return Mono[T]{m.f.Retry(n)} }

// Block subscribes m and waits for its end: (v, true, nil) for an item,
// (zero, false, nil) for an empty Mono, or the error, the cause of ctx
// included. The subscription's goroutines have exited when it returns.
func (m Mono[T]) Block(ctx context.Context) (v T, ok bool, err error) {
	err = m.f.run(ctx, func(x T) error {
		v, ok = x, true
		return nil
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	return v, ok, nil
}

// Next emits the first item of f and cancels the rest; empty if f is.
func (f Flux[T]) Next() Mono[T] { return Mono[T]{f.Take(1)} }

// Last emits the last item of f once it completed; the items it replaced go
// to the discard hook with ErrSuperseded. An empty f fails with an error
// wrapping ErrNoSuchElement.
func (f Flux[T]) Last() Mono[T] {
	return Mono[T]{Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var last T
		seen := false
		err := f.run(ctx, func(v T) error {
			if seen {
				discard(last, ErrSuperseded)
			}
			last, seen = v, true
			return nil
		})
		switch {
		case err != nil:
			if seen {
				discard(last, err)
			}
			return err
		case !seen:
			return fmt.Errorf("flux: Last: empty upstream: %w", ErrNoSuchElement)
		}
		return emit(last)
	}}}
}

// Single emits the only item of f. An empty f fails with an error wrapping
// ErrNoSuchElement; a second item cancels f and fails with one wrapping
// ErrTooManyElements, both items going to the discard hook with that error.
func (f Flux[T]) Single() Mono[T] {
	return Mono[T]{Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var one T
		seen := false
		tooMany := fmt.Errorf("flux: Single: more than one item: %w", ErrTooManyElements)
		err := f.run(ctx, func(v T) error {
			if seen {
				discard(one, tooMany)
				discard(v, tooMany)
				return tooMany
			}
			one, seen = v, true
			return nil
		})
		switch {
		case err == tooMany:
			return err
		case err != nil:
			if seen {
				discard(one, err)
			}
			return err
		case !seen:
			return fmt.Errorf("flux: Single: empty upstream: %w", ErrNoSuchElement)
		}
		return emit(one)
	}}}
}

// ElementAt emits the item at index i (from 0) and cancels the rest; the
// items before it go to the discard hook with ErrSkipped. An f with i items
// or fewer fails with an error wrapping ErrNoSuchElement; i < 0 gives
// ErrInvalidArgument.
func (f Flux[T]) ElementAt(i int) Mono[T] {
	if i < 0 {
		return MonoError[T](invalid("ElementAt", "negative index"))
	}
	return Mono[T]{Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		stop, n := newStop(), 0
		err := f.run(ctx, func(v T) error {
			if n < i {
				n++
				discard(v, ErrSkipped)
				return nil
			}
			if err := emit(v); err != nil {
				return err
			}
			return stop
		})
		switch {
		case err == stop:
			return nil
		case err == nil:
			return fmt.Errorf("flux: ElementAt: index %d beyond the %d items: %w", i, n, ErrNoSuchElement)
		}
		return err
	}}}
}

// Count emits the number of items of f once it completed.
func (f Flux[T]) Count() Mono[int] {
	return Mono[int]{Reduce(f, 0, func(n int, _ T) int { return n + 1 })}
}

// CollectList emits the items of f in a new slice once it completed (an
// empty, non-nil slice for none); on an error the items gathered go to the
// discard hook. Collect(ctx, f) is its blocking form. A package function,
// as Buffer: a method of Flux[T] cannot return a Mono of []T.
func CollectList[T any](f Flux[T]) Mono[[]T] {
	return gather(f, func() []T { return []T{} }, func(s []T, v T) ([]T, error) { return append(s, v), nil },
		func(ctx context.Context, s []T, err error) {
			discard := discarder[T](ctx)
			for _, v := range s {
				discard(v, err)
			}
		})
}

// IgnoreElements completes, or fails, as f does, without its items, which
// go to the discard hook with ErrSkipped. Fused.
func (f Flux[T]) IgnoreElements() Mono[T] {
	return Mono[T]{Flux[T]{subscribe: func(ctx context.Context, _ func(T) error) error {
		discard := discarder[T](ctx)
		return f.run(ctx, func(v T) error {
			discard(v, ErrSkipped)
			return nil
		})
	}}}
}
