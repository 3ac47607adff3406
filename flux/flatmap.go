package flux

import (
	"context"
	"sync"

	"github.com/aggflow/aggflow/component"
)

// FlatMap maps each item to an inner Flux and runs up to concurrency inners
// at once, each on its own goroutine, merging their items downstream (one
// at a time, under a mutex; items of different inners interleave in no
// fixed order). The upstream blocks while concurrency inners run. The first
// error, from the upstream, an inner, fn or the downstream, cancels
// everything else, and FlatMap returns only after every inner goroutine has
// exited. concurrency < 1 gives ErrInvalidArgument. See GroupBy for the
// concurrency needed to merge groups: below it, over groups whose inners
// wait for their group's end, the flow fails with ErrStalled instead of
// hanging. The inners are subscribed with a context of their own (the same
// deadline, values and cancellation), which is how GroupBy recognises them.
func FlatMap[T, R any](f Flux[T], fn func(T) Flux[R], concurrency int) Flux[R] {
	switch {
	case fn == nil:
		return Error[R](invalid("FlatMap", "nil function"))
	case concurrency < 1:
		return Error[R](invalid("FlatMap", "concurrency below 1"))
	}
	_, grouped := any(*new(T)).(awaiter)
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		discard := discarder[R](ctx)
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		ictx := newScope(ctx) // the inners'; see waitSlot
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
		feed := &flatFeed{Context: ctx, slots: slots}
		var w *waiter
		if grouped {
			w = &waiter{ctx: feed, scope: ictx, op: "FlatMap", inners: concurrency, holds: true}
		}
		cont := continuationOf[T](ctx)
		err := f.run(feed, func(v T) error {
			select {
			case slots <- struct{}{}:
			default:
				if err := waitSlot(ctx, slots, v, w); err != nil {
					return err
				}
			}
			inner, err := call1(fn, v)
			if err != nil {
				<-slots
				return cont.resume(v, err)
			}
			wg.Add(1)
			// A runtime.Goexit in the inner fails the flow instead of
			// completing it without the inner's items.
			component.Go(func() error { return runCaught(inner, ictx, out) }, func(err error) {
				defer wg.Done()
				defer func() { <-slots }()
				if err != nil {
					fail(exitedAs("FlatMap", err))
				}
			})
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

// flatFeed is the context FlatMap subscribes its upstream with. A GroupBy
// that finds it as its own context is fed to this FlatMap through
// synchronous operators only (any other operator would have passed a
// context of its own), so it may hand a group over on its own goroutine
// while a slot is free: FlatMap then runs the group on a goroutine of its
// own and returns at once.
type flatFeed struct {
	context.Context
	slots chan struct{}
}

// free tells whether a slot is free now. Only the goroutine that feeds
// FlatMap takes slots, so one free slot stays free until it does.
func (f *flatFeed) free() bool { return len(f.slots) < cap(f.slots) }

// waitSlot waits for a free slot or the end of ctx. When the item is a group
// of GroupBy (w not nil), GroupBy is told what its deliverer waits for, so
// that it can fail with ErrStalled when the inners holding the slots only
// wait for items it cannot bring.
func waitSlot[T any](ctx context.Context, slots chan struct{}, v T, w *waiter) error {
	if w != nil {
		if a := any(v).(awaiter); a.await(w) {
			defer a.resume(w)
		}
	}
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// runCaught subscribes f, turning a panic that escaped it into *PanicError so
// that a goroutine of ours never dies of it.
func runCaught[T any](f Flux[T], ctx context.Context, emit func(T) error) (err error) {
	defer component.Catch(&err)
	return f.run(ctx, emit)
}
