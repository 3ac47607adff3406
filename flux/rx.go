package flux

import (
	"context"
	"fmt"
	"reflect"

	"github.com/reactivex/rxgo/v2"
)

// FromObservable adapts an rxgo Observable: each subscription observes it
// with rxgo.WithContext(a context derived from the subscription's), emits
// its items as T and its error item as the error signal. An item that is not
// a T ends the flow with an error wrapping ErrTypeMismatch that names both
// types. On every exit the derived context is cancelled and the channel
// drained until rxgo closes it, so rxgo's goroutines exit too; an Observable
// whose channel ignores the context (rxgo.FromChannel over a channel nobody
// closes) therefore keeps the subscription waiting until the channel closes.
// Reactor: Flux.from(Publisher) (Flux.java).
func FromObservable[T any](obs rxgo.Observable) Flux[T] {
	if obs == nil {
		return Error[T](invalid("FromObservable", "nil observable"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		octx, cancel := context.WithCancel(ctx)
		ch := obs.Observe(rxgo.WithContext(octx))
		defer func() {
			cancel()
			for range ch {
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case it, ok := <-ch:
				if !ok {
					return nil
				}
				if it.Error() {
					return it.E
				}
				v, ok := it.V.(T)
				if !ok {
					return fmt.Errorf("flux: FromObservable: item of type %T, want %v: %w",
						it.V, reflect.TypeFor[T](), ErrTypeMismatch)
				}
				if err := emit(v); err != nil {
					return err
				}
			}
		}
	}}
}

// Observable returns a cold rxgo Observable that subscribes f each time it
// is observed: items as rxgo.Of(v), the error signal as rxgo.Error(err). The
// subscription is bounded by ctx and by the context rxgo passes to the
// producer (the observer's rxgo.WithContext); an observer that stops reading
// must cancel one of them so the subscription can end. Reactor needs no
// counterpart: a Flux is itself a Publisher.
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
