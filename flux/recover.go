package flux

import "context"

// Retry subscribes f again when it fails, up to n times, and signals the
// error of the last attempt if that fails too: Retry(0) is f. The items of
// every attempt are emitted, so after a failure the downstream sees the
// items of a cold source again from its start. A cancellation (the end of
// ctx, an error of the downstream, an early stop) is not retried. There is
// no delay between attempts; n = math.MaxInt retries without end. n < 0
// gives ErrInvalidArgument.
func (f Flux[T]) Retry(n int) Flux[T] {
	if n < 0 {
		return Error[T](invalid("Retry", "negative count"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		for left := n; ; left-- {
			sig, err := f.observe(ctx, emit)
			if sig != SignalError || left == 0 {
				return err
			}
		}
	}}
}

// OnErrorReturn replaces an error signal of the upstream with v followed by
// completion; a cancellation is not replaced.
func (f Flux[T]) OnErrorReturn(v T) Flux[T] {
	return f.OnErrorResume(func(error) Flux[T] { return Just(v) })
}

// OnErrorResumeIf replaces an error signal of the upstream for which pred
// returns true by the Flux fn returns for it; other errors, and
// cancellations, pass as they are. pred and fn run on the goroutine that
// received the error, once per error signal; a panic in either is joined
// to the error. Nothing per item. pred or fn nil gives ErrInvalidArgument.
func (f Flux[T]) OnErrorResumeIf(pred func(error) bool, fn func(error) Flux[T]) Flux[T] {
	if pred == nil {
		return Error[T](invalid("OnErrorResumeIf", "nil predicate"))
	}
	return f.resumeIf("OnErrorResumeIf", pred, fn)
}

// OnErrorComplete replaces an error signal of the upstream with completion:
// the items before it are kept, the error is dropped. A cancellation is not
// replaced.
func (f Flux[T]) OnErrorComplete() Flux[T] {
	return f.resumeIf("OnErrorComplete", nil, completed[T])
}

// OnErrorCompleteIf replaces an error signal of the upstream for which
// pred returns true with completion; other errors pass. A panic in pred is
// joined to the error; pred nil gives ErrInvalidArgument.
func (f Flux[T]) OnErrorCompleteIf(pred func(error) bool) Flux[T] {
	if pred == nil {
		return Error[T](invalid("OnErrorCompleteIf", "nil predicate"))
	}
	return f.resumeIf("OnErrorCompleteIf", pred, completed[T])
}

// completed is the fallback of OnErrorComplete: the empty Flux.
func completed[T any](error) Flux[T] { return Flux[T]{} }

// OnErrorMap replaces an error signal of the upstream with fn(err); a
// cancellation is not mapped. fn returning nil keeps err (an error signal
// cannot become a completion here: use OnErrorResume). A panic in fn is
// joined to err.
func (f Flux[T]) OnErrorMap(fn func(error) error) Flux[T] {
	if fn == nil {
		return Error[T](invalid("OnErrorMap", "nil function"))
	}
	return f.OnErrorResume(func(err error) Flux[T] {
		if mapped := fn(err); mapped != nil {
			return Error[T](mapped)
		}
		return Error[T](err)
	})
}

// continueKey is the context key of the OnErrorContinue handler for the
// items of type U.
type continueKey[U any] struct{}

// OnErrorContinue lets the fused operators upstream of it go on after their
// user function failed on an item of type U: instead of ending the flow,
// such an operator drops the item, calls fn with the error (a *PanicError:
// these functions fail only by panicking) and the item, and takes the next
// item. It works upstream through the subscription's ctx, and only with the
// operators that support it.
//
// Exactly these failures are resumed: a panic in the function of Map,
// Filter or DoOnNext, in the key function of DistinctBy or
// DistinctUntilChangedBy, or in the mapper of ConcatMap, FlatMap or
// SwitchMap, on an item of type U, anywhere upstream within the
// subscription, inside inners included (a Map from U to V resumes for U; a
// Map after it, whose input is V, needs a handler for V). Anything else
// still ends the flow: the error signals of sources and inners, the errors
// of the downstream, panics in the functions of Zip, CombineLatest, Scan,
// Reduce, TakeUntil, Using and the hooks. A dropped item is given to fn,
// not to the discard hook.
//
// An inner OnErrorContinue for the same U takes precedence. fn runs on the
// goroutine of the failing operator, and a panic in fn is joined to the
// error, which then ends the flow. Costs one context value per
// subscription, nothing per item. fn nil gives ErrInvalidArgument.
func OnErrorContinue[T, U any](f Flux[T], fn func(err error, v U)) Flux[T] {
	if fn == nil {
		return Error[T](invalid("OnErrorContinue", "nil function"))
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		return f.run(context.WithValue(ctx, continueKey[U]{}, fn), emit)
	}}
}

// continuation is the OnErrorContinue handler for the items of type T that a
// fused operator finds in its subscription's ctx; nil when there is none. A
// named func type rather than a closure, so that looking it up allocates
// nothing.
type continuation[T any] func(error, T)

// continuationOf looks the handler up; do it once per subscription.
func continuationOf[T any](ctx context.Context) continuation[T] {
	fn, _ := ctx.Value(continueKey[T]{}).(func(error, T))
	return fn
}

// resume is what a fused operator returns when its user function failed with
// err on v: nil when the handler took v and err (the operator drops v and
// goes on), else the error that ends the flow (err, joined with the
// handler's panic if it panicked).
func (c continuation[T]) resume(v T, err error) error {
	if c == nil {
		return err
	}
	if perr := callV(func(v T) { c(err, v) }, v); perr != nil {
		return errorsJoin(err, perr)
	}
	return nil
}
