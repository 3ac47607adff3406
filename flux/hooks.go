package flux

import "context"

// SignalNext is the kind of an Event carrying an item. DoFinally never
// sees it.
const SignalNext = SignalCancel + 1

// Event is one signal of a flow as DoOnEach sees it: an item (Kind
// SignalNext, Value set), the error signal (SignalError, Err set) or the
// completion (SignalComplete).
type Event[T any] struct {
	Kind  Signal
	Value T     // the item, for SignalNext
	Err   error // the error signal, for SignalError
}

// DoOnSubscribe calls fn on the subscribing goroutine each time f is
// subscribed, before f is. A panic in fn ends the flow with *PanicError and
// f is not subscribed. fn gets nothing: there is no subscription to
// request or cancel with.
func (f Flux[T]) DoOnSubscribe(fn func()) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnSubscribe", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		if err := call0(fn); err != nil {
			return err
		}
		return f.run(ctx, emit)
	}}
}

// DoOnCancel calls fn once when the flow ends by a cancellation (as
// DoFinally's SignalCancel: the downstream returned an error or stopped
// early, or ctx ended), after the upstream has returned, on the subscribing
// goroutine. A panic in fn is joined to the cancellation; an early stop
// upstream of it (Take) still completes, so such a panic is lost.
func (f Flux[T]) DoOnCancel(fn func()) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnCancel", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		if sig == SignalCancel {
			return errorsJoin(err, call0(fn))
		}
		return err
	}}
}

// DoOnTerminate calls fn when the upstream completes or fails (not on a
// cancellation), before the signal passes on. A panic in fn turns a
// completion into an error signal and is joined to an error.
func (f Flux[T]) DoOnTerminate(fn func()) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnTerminate", "nil function"))
	}
	return f.onTerminate(fn)
}

// DoAfterTerminate calls fn when the upstream completes or fails (not on a
// cancellation). A terminal signal travels as the return of subscribe, so,
// as with DoFinally, fn runs just before the operators after it see the
// signal: put it last to run after the whole chain. A panic in fn is joined
// to the signal.
func (f Flux[T]) DoAfterTerminate(fn func()) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoAfterTerminate", "nil function"))
	}
	return f.onTerminate(fn)
}

func (f Flux[T]) onTerminate(fn func()) Flux[T] {
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		sig, err := f.observe(ctx, emit)
		if sig == SignalCancel {
			return err
		}
		return errorsJoin(err, call0(fn))
	}}
}

// DoOnEach calls fn with an Event for each item (before passing it on), for
// the error signal and for the completion; a cancellation is no signal of
// the upstream and is not seen. A panic in fn on an item cancels the
// upstream and fn then sees that panic as the error signal; a
// panic on the error signal is joined to it, one on the completion turns it
// into an error signal. fn runs on the goroutine that delivers the item, so
// never concurrently with itself.
func (f Flux[T]) DoOnEach(fn func(Event[T])) Flux[T] {
	if fn == nil {
		return Error[T](invalid("DoOnEach", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		var failed error // fn's panic on an item
		sig, err := f.observe(ctx, func(v T) error {
			if err := callV(fn, Event[T]{Kind: SignalNext, Value: v}); err != nil {
				failed = err
				return err
			}
			return emit(v)
		})
		switch {
		case failed != nil || sig == SignalError:
			return errorsJoin(err, callV(fn, Event[T]{Kind: SignalError, Err: err}))
		case sig == SignalComplete:
			return callV(fn, Event[T]{Kind: SignalComplete})
		}
		return err
	}}
}
