package flux

import (
	"context"
	"sync"
)

// FlatMap maps each item to an inner Flux and runs up to concurrency inners
// at once, each on its own goroutine, merging their items downstream (one at
// a time, under a mutex; items of different inners interleave in no fixed
// order). The upstream blocks while concurrency inners run (Reactor's
// initial request equal to the concurrency). The first error, from the
// upstream, an inner, fn or the downstream, cancels everything else, and
// FlatMap returns only after every inner goroutine has exited. Reactor:
// Flux#flatMap(Function, int) (FluxFlatMap.java), without delayError.
// concurrency < 1 gives ErrInvalidArgument. See GroupBy for the concurrency
// needed to merge groups.
func FlatMap[T, R any](f Flux[T], fn func(T) Flux[R], concurrency int) Flux[R] {
	switch {
	case fn == nil:
		return Error[R](invalid("FlatMap", "nil function"))
	case concurrency < 1:
		return Error[R](invalid("FlatMap", "concurrency below 1"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		discard := discarder[R](ctx)
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var (
			wg    sync.WaitGroup
			emitM sync.Mutex // serializes emit
			errM  sync.Mutex
			first error
		)
		fail := func(err error) {
			errM.Lock()
			defer errM.Unlock()
			if first == nil {
				first = err
				cancel(err)
			}
		}
		out := func(r R) error {
			emitM.Lock()
			defer emitM.Unlock()
			if err := ctxDone(ctx); err != nil {
				discard(r, err) // an inner's item arriving after the end
				return err
			}
			if err := emit(r); err != nil {
				fail(err)
				return err
			}
			return nil
		}
		slots := make(chan struct{}, concurrency)
		err := f.run(ctx, func(v T) error {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			inner, err := call1(fn, v)
			if err != nil {
				<-slots
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				if err := runCaught(inner, ctx, out); err != nil {
					fail(err)
				}
			}()
			return nil
		})
		if err != nil {
			fail(err)
		}
		wg.Wait()
		errM.Lock()
		defer errM.Unlock()
		return first
	}}
}

// runCaught subscribes f, turning a panic that escaped it into *PanicError so
// that a goroutine of ours never dies of it.
func runCaught[T any](f Flux[T], ctx context.Context, emit func(T) error) (err error) {
	defer catch(&err)
	return f.run(ctx, emit)
}
