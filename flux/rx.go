package flux

import (
	"context"
	"fmt"
	"reflect"

	"github.com/reactivex/rxgo/v2"
)

// FromObservable adapts an rxgo Observable: each subscription calls
// obs.Observe(rxgo.WithContext(octx)), octx being derived from the
// subscription's context, and emits the items as T and the error item as
// the error signal. An item that is not a T ends the flow with an error
// wrapping ErrTypeMismatch that names both types.
//
// The subscription reads one item at a time and reads none after the
// downstream is done (Take satisfied, an error returned by onNext) or the
// subscription's context ended. On every exit it cancels octx and returns at
// once, without draining the channel: rxgo's channels are not closed on
// cancellation (Range, Just and Defer producers return on octx without
// closing), and draining would take items from a channel the caller owns
// (rxgo.FromChannel hands its channel out as is). So:
//   - Observables whose goroutines start at Observe (Just, Range, Defer,
//     FromChannel, and operators such as Map applied to them) honour octx:
//     their goroutines return once octx is cancelled, shortly after the
//     subscription ended; they are not joined before Subscribe returns.
//   - rxgo.FromChannel: the items the subscription did not read stay in the
//     caller's channel for its next reader.
//   - Observables that run from their construction on their own context
//     (Create, Interval, FromEventSource, connectable ones) ignore octx: their
//     goroutines block sending to the abandoned channel until the context
//     they were built with (rxgo.WithContext at construction) ends, and the
//     caller must end it.
func FromObservable[T any](obs rxgo.Observable) Flux[T] {
	if obs == nil {
		return Error[T](invalid("FromObservable", "nil observable"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		return FromChannel(obs.Observe(rxgo.WithContext(octx))).run(ctx, func(it rxgo.Item) error {
			if it.Error() {
				return it.E
			}
			v, ok := it.V.(T)
			if !ok {
				return fmt.Errorf("flux: FromObservable: item of type %T, want %v: %w",
					it.V, reflect.TypeFor[T](), ErrTypeMismatch)
			}
			return emit(v)
		})
	}}
}

// Observable returns a cold rxgo Observable that subscribes f each time it
// is observed: items as rxgo.Of(v), the error signal as rxgo.Error(err). The
// subscription is bounded by ctx and by the context rxgo passes to the
// producer (the observer's rxgo.WithContext); an observer that stops reading
// must cancel one of them so the subscription can end.
func (f Flux[T]) Observable(ctx context.Context) rxgo.Observable {
	return rxgo.Defer([]rxgo.Producer{func(pctx context.Context, next chan<- rxgo.Item) {
		sctx, cancel := context.WithCancelCause(pctx)
		defer cancel(nil)
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		defer stop()
		err := f.Subscribe(sctx, func(v T) error {
			if !rxgo.Of(v).SendContext(sctx, next) {
				return context.Cause(sctx)
			}
			return nil
		})
		if err != nil && sctx.Err() == nil {
			rxgo.Error(err).SendContext(sctx, next)
		}
	}}, rxgo.WithContext(ctx))
}
