package flux

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aggflow/aggflow/component"
)

// Flux is a cold, typed sequence of 0..N items followed by completion or an
// error. Assembling operators starts nothing; every Subscribe runs the
// whole chain afresh.
//
// Underneath, a Flux is a push-based subscribe function: items are pushed by
// calling an emit function, one at a time (never concurrently), and the
// subscribe call returns nil on completion or the error signal. Backpressure is
// the blocking of emit; an emit that returns an error means "downstream is
// done" and the source stops. The zero Flux is Empty.
//
// A Flux value is immutable and safe to share and to subscribe from several
// goroutines at once; each subscription has its own state.
type Flux[T any] struct {
	subscribe func(ctx context.Context, emit func(T) error) error
	// group is set on the group fluxes of GroupBy so that PublishOn can drain
	// the group's queue directly instead of copying into its own.
	group *pipe[T]
	// sync is set on the fluxes whose subscribe pushes every item on the
	// calling goroutine and waits for nothing but emit: FromSlice, Range,
	// Error, and the operators in synchronous() below over such a flux.
	// SwitchMap runs them inline.
	sync bool
}

// synchronous reports whether f is known to push all its items on the
// subscribing goroutine, waiting for nothing but emit: the zero Flux, Just,
// FromSlice, Range and Error, and Map, Filter, DoOnNext, Take, Skip,
// DoOnDiscard and OnErrorContinue over such a flux.
func (f Flux[T]) synchronous() bool { return f.subscribe == nil || f.sync }

// GroupedFlux is one group of GroupBy: the items whose key is Key, in
// arrival order. Its Flux is unicast: a second Subscribe gets an error
// wrapping ErrUnicastGroup.
type GroupedFlux[T any] struct {
	Key int
	Flux[T]
}

// PanicError is a user function's recovered panic (value and stack). Every
// panic in a function handed to this package ends the flow with an error
// signal carrying a *PanicError; find it with errors.As.
type PanicError = component.PanicError

// Signal is the kind of end a subscription met, as passed to DoFinally.
type Signal int

const (
	// SignalComplete: the source completed and every item was delivered.
	SignalComplete Signal = iota
	// SignalError: the source, or an operator before the observer, failed.
	SignalError
	// SignalCancel: the downstream stopped the flow (an error returned by an
	// onNext or a later operator, a satisfied Take) or the context ended.
	SignalCancel
)

// String returns "complete", "error", "cancel", "next" or "Signal(n)".
func (s Signal) String() string {
	switch s {
	case SignalComplete:
		return "complete"
	case SignalError:
		return "error"
	case SignalCancel:
		return "cancel"
	case SignalNext:
		return "next"
	}
	return "Signal(" + strconv.Itoa(int(s)) + ")"
}

// scope is a context with an identity of its own and everything else (its
// deadline, cancellation and values) from its parent. FlatMap and ConcatMap
// subscribe their inners with one, and Create hands one to its function, so
// that GroupBy can tell by comparing contexts which consumers of its groups
// run as the inners of the operator that keeps its deliverer waiting (see
// board.stalledLocked). *scope is comparable, whatever the parent.
type scope struct{ context.Context }

func newScope(ctx context.Context) context.Context { return &scope{ctx} }

// run subscribes f, treating the zero Flux as Empty.
func (f Flux[T]) run(ctx context.Context, emit func(T) error) error {
	if f.subscribe == nil {
		return nil
	}
	return f.subscribe(ctx, emit)
}

// stopError ends a flow early without an error, e.g. once Take is
// satisfied. Each subscription makes its own (a non-zero size keeps the
// pointers distinct) and translates only its own back into completion, so a
// stop never completes an operator it did not come from.
type stopError struct{ _ byte }

func (*stopError) Error() string { return "flux: stopped" }

func newStop() *stopError { return new(stopError) }

func isStop(err error) bool {
	var s *stopError
	return errors.As(err, &s)
}

// reasonOf is what discard hooks and cut-off group subscribers are told: the
// error that ended the flow, with an early stop shown as ErrCancelled.
func reasonOf(err error) error {
	if err == nil || isStop(err) {
		return ErrCancelled
	}
	return err
}

// ctxDone returns the cause of ctx once it is done, nil before.
func ctxDone(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	default:
		return nil
	}
}

// exitedAs names op in the error of a runtime.Goexit that component's
// guard reported (a *PanicError of ErrGoexit: a downstream's t.FailNow on a
// goroutine or task of ours, for instance); other errors stay as they are.
func exitedAs(op string, err error) error {
	if isGoexit(err) {
		return fmt.Errorf("flux: %s: %w", op, err)
	}
	return err
}

// isGoexit reports whether err is component's report of a runtime.Goexit.
func isGoexit(err error) bool {
	p, ok := err.(*PanicError)
	return ok && p.Value == component.ErrGoexit
}

func call0(fn func()) (err error) {
	defer component.Catch(&err)
	fn()
	return nil
}

func callV[A any](fn func(A), a A) (err error) {
	defer component.Catch(&err)
	fn(a)
	return nil
}

func callR[R any](fn func() R) (r R, err error) {
	defer component.Catch(&err)
	return fn(), nil
}

func call1[A, R any](fn func(A) R, a A) (r R, err error) {
	defer component.Catch(&err)
	return fn(a), nil
}

func call2[A, B, R any](fn func(A, B) R, a A, b B) (r R, err error) {
	defer component.Catch(&err)
	return fn(a, b), nil
}

// callErr calls a user function that returns an error, recovering its panic.
func callErr[A any](fn func(A) error, a A) (err error) {
	defer component.Catch(&err)
	return fn(a)
}

// observe subscribes f and classifies its end: SignalCancel when emit
// returned an error, an early stop passed, or ctx ended.
func (f Flux[T]) observe(ctx context.Context, emit func(T) error) (Signal, error) {
	down := false
	err := f.run(ctx, func(v T) error {
		if err := emit(v); err != nil {
			down = true
			return err
		}
		return nil
	})
	switch {
	case err == nil:
		return SignalComplete, nil
	case down || isStop(err) || ctx.Err() != nil:
		return SignalCancel, err
	}
	return SignalError, err
}

func call2Err[A, B any](fn func(A, B) error, a A, b B) (err error) {
	defer component.Catch(&err)
	return fn(a, b)
}

// errorsJoin keeps both the signal being delivered and a later hook failure.
func errorsJoin(first, second error) error {
	if first == nil {
		return second
	}
	return errors.Join(first, second)
}
