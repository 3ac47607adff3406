package flux

import (
	"context"
	"errors"
)

// Synchronous operators wrap emit: they run on the goroutine that delivers
// the item, start no goroutine and allocate nothing per item.

// Map emits fn(v) for each item v. A panic in fn ends the flow with
// *PanicError.
func Map[T, R any](f Flux[T], fn func(T) R) Flux[R] {
	if fn == nil {
		return Error[R](invalid("Map", "nil function"))
	}
	return Flux[R]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(R) error) error {
		cont := continuationOf[T](ctx)
		return f.run(ctx, func(v T) error {
			r, err := call1(fn, v)
			if err != nil {
				return cont.resume(v, err)
			}
			return emit(r)
		})
	}}
}

// Filter emits the items for which pred returns true and gives the others
// to the discard hook (DoOnDiscard) with ErrFiltered.
func (f Flux[T]) Filter(pred func(T) bool) Flux[T] {
	if pred == nil {
		return Error[T](invalid("Filter", "nil predicate"))
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		cont, discard := continuationOf[T](ctx), discarder[T](ctx)
		return f.run(ctx, func(v T) error {
			keep, err := call1(pred, v)
			if err != nil {
				return cont.resume(v, err)
			}
			if !keep {
				discard(v, ErrFiltered)
				return nil
			}
			return emit(v)
		})
	}}
}

// DoOnNext calls fn with each item before passing it on.
func (f Flux[T]) DoOnNext(fn func(T)) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnNext", "nil function"))
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		cont := continuationOf[T](ctx)
		return f.run(ctx, func(v T) error {
			if err := callV(fn, v); err != nil {
				return cont.resume(v, err)
			}
			return emit(v)
		})
	}}
}

// DoOnError calls fn with the error signal of the upstream (not with a
// cancellation coming from downstream or from ctx) before passing it on. A
// panic in fn is joined to the error.
func (f Flux[T]) DoOnError(fn func(error)) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnError", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		if sig == SignalError {
			return errorsJoin(err, callV(fn, err))
		}
		return err
	}}
}

// DoOnComplete calls fn when the upstream completes, before passing the
// completion on; a panic in fn turns it into an error signal.
func (f Flux[T]) DoOnComplete(fn func()) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnComplete", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		if sig == SignalComplete {
			return call0(fn)
		}
		return err
	}}
}

// DoFinally calls fn exactly once per subscription with the kind of end:
// SignalComplete, SignalError, or SignalCancel (downstream stopped the flow
// or ctx ended). It runs after the last item and the cancellation have
// passed, and after every goroutine of the upstream has been joined, on the
// subscribing goroutine. Because a terminal signal travels as the return of
// subscribe, fn runs just before the signal reaches the operators after
// DoFinally; put DoFinally last to observe the end of the whole chain. A
// panic in fn is joined to the signal.
func (f Flux[T]) DoFinally(fn func(Signal)) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoFinally", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		return errorsJoin(err, callV(fn, sig))
	}}
}

// OnErrorResume replaces an error signal of the upstream by the Flux fn
// returns for it (a cancellation is not resumed).
func (f Flux[T]) OnErrorResume(fn func(error) Flux[T]) Flux[T] {
	return f.resumeIf("OnErrorResume", nil, fn)
}

// resumeIf is OnErrorResume for the errors pred accepts (nil: all), op
// naming the operator in the errors of its arguments.
func (f Flux[T]) resumeIf(op string, pred func(error) bool, fn func(error) Flux[T]) Flux[T] {
	if fn == nil {
		return Error[T](invalid(op, "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		if sig != SignalError {
			return err
		}
		if pred != nil {
			if ok, perr := call1(pred, err); perr != nil || !ok {
				return errorsJoin(err, perr)
			}
		}
		next, perr := call1(fn, err)
		if perr != nil {
			return errorsJoin(err, perr)
		}
		return next.run(ctx, emit)
	}}
}

// Take emits the first n items, then completes and cancels the upstream.
// Take(0) completes without subscribing; n < 0 gives ErrInvalidArgument.
func (f Flux[T]) Take(n int) Flux[T] {
	if n < 0 {
		return Error[T](invalid("Take", "negative count"))
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		if n == 0 {
			return nil
		}
		stop, left := newStop(), n
		err := f.run(ctx, func(v T) error {
			if left == 0 {
				return stop
			}
			left--
			if err := emit(v); err != nil {
				return err
			}
			if left == 0 {
				return stop
			}
			return nil
		})
		if errors.Is(err, stop) {
			return nil
		}
		return err
	}}
}

// Skip drops the first n items and emits the rest; n < 0 gives
// ErrInvalidArgument.
func (f Flux[T]) Skip(n int) Flux[T] {
	if n < 0 {
		return Error[T](invalid("Skip", "negative count"))
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		left := n
		return f.run(ctx, func(v T) error {
			if left > 0 {
				left--
				return nil
			}
			return emit(v)
		})
	}}
}

// TakeUntil emits items up to and including the first one for which pred
// returns true, then completes and cancels the upstream. If pred panics,
// the item is still emitted before the error.
func (f Flux[T]) TakeUntil(pred func(T) bool) Flux[T] {
	if pred == nil {
		return Error[T](invalid("TakeUntil", "nil predicate"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		stop, done := newStop(), false
		err := f.run(ctx, func(v T) error {
			if done {
				return stop
			}
			match, perr := call1(pred, v)
			if err := emit(v); err != nil {
				return err
			}
			if perr != nil {
				return perr
			}
			if match {
				done = true
				return stop
			}
			return nil
		})
		if errors.Is(err, stop) {
			return nil
		}
		return err
	}}
}

// Scan emits seed, then the running accumulation fn(acc, v) after each
// item.
func Scan[T, A any](f Flux[T], seed A, fn func(A, T) A) Flux[A] {
	if fn == nil {
		return Error[A](invalid("Scan", "nil function"))
	}
	return Flux[A]{subscribe: func(ctx context.Context, emit func(A) error) error {
		if err := emit(seed); err != nil {
			return err
		}
		acc := seed
		return f.run(ctx, func(v T) error {
			next, err := call2(fn, acc, v)
			if err != nil {
				return err
			}
			acc = next
			return emit(acc)
		})
	}}
}

// Reduce folds the items with fn starting from seed and emits the result
// once the upstream completes (seed for an empty upstream).
func Reduce[T, A any](f Flux[T], seed A, fn func(A, T) A) Flux[A] {
	if fn == nil {
		return Error[A](invalid("Reduce", "nil function"))
	}
	return Flux[A]{subscribe: func(ctx context.Context, emit func(A) error) error {
		acc := seed
		err := f.run(ctx, func(v T) (err error) {
			acc, err = call2(fn, acc, v)
			return err
		})
		if err != nil {
			return err
		}
		return emit(acc)
	}}
}

// Buffer emits the items in slices of n (the last one may be shorter; none
// if it would be empty). Each slice is new and owned by the receiver. On an
// error or cancellation the partial slice is passed to the discard hook
// (DoOnDiscard). n < 1 gives ErrInvalidArgument.
func Buffer[T any](f Flux[T], n int) Flux[[]T] {
	if n < 1 {
		return Error[[]T](invalid("Buffer", "size below 1"))
	}
	return Flux[[]T]{subscribe: func(ctx context.Context, emit func([]T) error) error {
		discard := discarder[T](ctx)
		var buf []T
		err := f.run(ctx, func(v T) error {
			if buf == nil {
				buf = make([]T, 0, n)
			}
			buf = append(buf, v)
			if len(buf) < n {
				return nil
			}
			full := buf
			buf = nil
			return emit(full)
		})
		if err == nil && len(buf) > 0 {
			return emit(buf)
		}
		for _, v := range buf {
			discard(v, err)
		}
		return err
	}}
}

// ConcatMap maps each item to an inner Flux and emits the inner's items,
// one inner at a time, in order: the next item is not pulled until the
// current inner completed (no prefetch). The inner
// runs on the goroutine that delivered the item; its error ends the whole
// flow at once. Over the groups of GroupBy, the
// groups after the one running wait unsubscribed; one of them becoming full
// while the inner running waits for an item of its group fails the flow
// with ErrStalled (see GroupBy).
func ConcatMap[T, R any](f Flux[T], fn func(T) Flux[R]) Flux[R] {
	if fn == nil {
		return Error[R](invalid("ConcatMap", "nil function"))
	}
	_, grouped := any(*new(T)).(awaiter)
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		uctx, ictx := ctx, ctx
		var w *waiter
		if grouped {
			// Over the groups of GroupBy: tell GroupBy while an inner runs,
			// so that it can fail with ErrStalled when the inner only waits
			// for items it cannot bring.
			uctx, ictx = newScope(ctx), newScope(ctx)
			w = &waiter{ctx: uctx, scope: ictx, op: "ConcatMap", inners: 1}
		}
		cont := continuationOf[T](ctx)
		return f.run(uctx, func(v T) error {
			inner, err := call1(fn, v)
			if err != nil {
				return cont.resume(v, err)
			}
			if w != nil {
				if a := any(v).(awaiter); a.await(w) {
					defer a.resume(w)
				}
			}
			return inner.run(ictx, emit)
		})
	}}
}
