package flux

import "context"

// FlatMapSequential maps each item to an inner Flux and runs up to
// concurrency inners at once, each on a goroutine of its own, like FlatMap,
// but emits their items in the order of the items they came from: every
// item of the first inner, then of the second, and so on. Each inner queues
// up to prefetch items while an earlier one is being delivered, then
// blocks; so at most concurrency*prefetch items are held, and the upstream
// is pulled only while fewer than concurrency inners are running or waiting
// their turn. The first error, of the upstream, an inner, fn (a panic) or
// the downstream, cancels everything at once: the items queued go to the
// discard hook with it.
//
// The upstream runs on a goroutine of the subscription, the inners on one
// each, and the items are delivered on the subscribing goroutine; all have
// exited when the subscription returns. Costs per inner a goroutine and a
// queue of prefetch slots; per item, a mutex-guarded hand-over and, when
// the deliverer waits for it, a wake-up. fn nil, concurrency < 1 or
// prefetch < 1 gives ErrInvalidArgument.
func FlatMapSequential[T, R any](f Flux[T], fn func(T) Flux[R], concurrency, prefetch int) Flux[R] {
	switch {
	case fn == nil:
		return Error[R](invalid("FlatMapSequential", "nil function"))
	case concurrency < 1:
		return Error[R](invalid("FlatMapSequential", "concurrency below 1"))
	case prefetch < 1:
		return Error[R](invalid("FlatMapSequential", "prefetch below 1"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) (err error) {
		c := newCrew(ctx)
		discard := discarder[R](ctx)
		// The inners started and not yet delivered, in order: one being
		// delivered and up to concurrency-1 here.
		order := make(chan *pipe[R], concurrency-1)
		defer func() {
			c.cancel(reasonOf(err))
			for p := range order { // closed once the upstream returned
				p.cancel(context.Cause(c.ctx), false)
			}
			c.wg.Wait()
		}()
		cont := continuationOf[T](ctx)
		spawn(c, "FlatMapSequential", f, func(v T) error {
			inner, err := call1(fn, v)
			if err != nil {
				return cont.resume(v, err)
			}
			p := newPipe(prefetch, discard)
			if err := send(c.ctx, order, p); err != nil {
				return err
			}
			spawn(c, "FlatMapSequential", inner, func(r R) error {
				err := p.push(c.ctx, r)
				if err == errGone { // the deliverer cancelled p: r not taken
					err = p.reason()
					discard(r, err)
				}
				return err
			}, func(err error) {
				if err != nil {
					c.cancel(err)
				}
				p.terminate(err)
			})
			return nil
		}, func(err error) {
			if err != nil {
				c.cancel(err)
			}
			close(order)
		})
		for p := range order {
			if err := p.consume(c.ctx, emit); err != nil {
				c.cancel(err)
				return c.end(err)
			}
		}
		return c.end(nil)
	}}
}

// ConcatMapEager is FlatMapSequential under the name of the eager form of
// ConcatMap: up to concurrency inners subscribed at once, their items
// emitted in the order of the upstream items, each inner's in its order.
// Arguments, costs and errors are FlatMapSequential's.
func ConcatMapEager[T, R any](f Flux[T], fn func(T) Flux[R], concurrency, prefetch int) Flux[R] {
	return FlatMapSequential(f, fn, concurrency, prefetch)
}

// MergeSequential subscribes every source at once and emits their items in
// the order of the sources: FlatMapSequential over fs with a concurrency of
// len(fs) and a prefetch of DefaultGroupBuffer (32).
func MergeSequential[T any](fs ...Flux[T]) Flux[T] {
	return FlatMapSequential(FromSlice(fs), identity[Flux[T]], max(1, len(fs)), DefaultGroupBuffer)
}
