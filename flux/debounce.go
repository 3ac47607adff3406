package flux

import (
	"context"
	"time"
)

// Debounce emits an item once d passed without a newer one: each item
// waits d, and an item arriving meanwhile takes its place, the replaced one
// going to the discard hook (DoOnDiscard) with ErrSuperseded. At
// completion the item still waiting is emitted at once, then the
// completion; on an error or cancellation it goes to the discard hook with
// the reason. A steady stream of items closer than d apart emits nothing
// until it pauses or completes.
//
// The upstream runs on the subscribing goroutine; an item whose wait is
// over is delivered on the goroutine of its timer (one time.AfterFunc per
// item, joined before Debounce returns), the two taking turns, so items
// reach the downstream one at a time and the upstream waits while a
// debounced item is delivered. Costs per item one timer and one closure.
// d <= 0 gives ErrInvalidArgument.
func (f Flux[T]) Debounce(d time.Duration) Flux[T] {
	if d <= 0 {
		return Error[T](invalid("Debounce", "duration not positive"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		uctx, stop := context.WithCancelCause(ctx)
		b := &debouncer[T]{aside: newAside[T]("Debounce", uctx, stop, emit), d: d}
		// On every exit, a runtime.Goexit of the downstream included: as
		// BufferTimeout.
		defer b.alarm.wait()
		defer stop(nil)
		defer b.alarm.disarm()
		uerr := f.run(uctx, b.next)
		return settle(&b.aside, &b.alarm, uerr, func() (T, []T) {
			v, rest, _ := b.held.take()
			return v, rest
		})
	}}
}

// debouncer is the state of one Debounce subscription, guarded by lock
// (taken by the upstream's goroutine and the timer's).
type debouncer[T any] struct {
	aside[T, T]
	d     time.Duration
	alarm alarm
	held  latestBin[T]
	gen   uint64 // the number of the item held; a timer of another is stale
}

func (b *debouncer[T]) next(v T) error {
	if err := b.enter(v); err != nil {
		return err
	}
	old, replaced := b.held.add(v)
	b.gen++
	gen := b.gen
	b.alarm.arm(b.d, func() { b.expire(gen) })
	b.lock.give()
	if replaced {
		b.discard(old, ErrSuperseded)
	}
	return nil
}

// expire delivers item number gen when its wait is over, on the timer's
// goroutine, unless a newer item took its place or the flow is ending
// (settle then handles it).
func (b *debouncer[T]) expire(gen uint64) {
	if b.lock.take(b.uctx) != nil {
		return
	}
	defer b.lock.give()
	if gen != b.gen || !b.held.has || b.err != nil || b.uctx.Err() != nil {
		return
	}
	v, _, _ := b.held.take()
	b.deliver(v)
}
