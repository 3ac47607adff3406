package flux

import (
	"context"
	"errors"
	"iter"

	"github.com/aggflow/aggflow/component"
)

// Subscribe runs f, calling onNext with each item on the goroutine that
// delivers it (the caller's, or a worker's after PublishOn; never two at
// once), and blocks until the flow completes (nil), fails (its error), or
// ctx ends (the cause of ctx). An error returned by onNext, or its panic as
// *PanicError, cancels the flow and is returned. A ctx already done still
// subscribes f, which ends at once with its cause: a unicast sink's Flux
// is cancelled by it.
// Every goroutine the subscription started has exited when Subscribe
// returns.
func (f Flux[T]) Subscribe(ctx context.Context, onNext func(T) error) error {
	if onNext == nil {
		return invalid("Subscribe", "nil function")
	}
	return f.run(ctx, func(v T) error { return callErr(onNext, v) })
}

// Collect subscribes f and returns its items in order, with the error that
// ended the flow (the items received before it are returned too).
func Collect[T any](ctx context.Context, f Flux[T]) ([]T, error) {
	var out []T
	err := f.Subscribe(ctx, func(v T) error {
		out = append(out, v)
		return nil
	})
	return out, err
}

// errBreak ends the subscription of All when the loop body stops early.
var errBreak = errors.New("flux: iteration stopped")

// All returns a range-over-func iterator over f: each item as (v, nil), and
// a failure as one final (zero, err), the cause of ctx included. The loop
// body always runs on the ranging goroutine, even when the upstream is
// asynchronous: the subscription runs on a goroutine of its own that hands
// each item over and waits until the body finished with it, so nothing is
// pulled ahead. Breaking out of the loop (or a panic in the body) cancels
// the subscription and waits for its goroutines to exit.
func (f Flux[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		items, acks, res := make(chan T), make(chan struct{}), make(chan error, 1)
		component.Go(func() error {
			return f.Subscribe(ctx, func(v T) error {
				select {
				case items <- v:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				select {
				case <-acks:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
		}, func(err error) { res <- exitedAs("All", err) }) // a runtime.Goexit in the upstream included
		finished := false
		defer func() {
			if !finished {
				cancel(errBreak)
				<-res
			}
			cancel(nil)
		}()
		for {
			select {
			case v := <-items:
				if !yield(v, nil) {
					return
				}
				select {
				case acks <- struct{}{}:
				case <-ctx.Done():
				}
			case err := <-res:
				finished = true
				if err != nil {
					var zero T
					yield(zero, err)
				}
				return
			}
		}
	}
}
