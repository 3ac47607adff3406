package flux

import (
	"context"
	"time"
)

// BufferTimeout emits the items in slices of at most n, in order: a slice
// is emitted as soon as it holds n items, or d after its first item
// arrived, whichever comes first; at completion the partial slice, if any.
// No empty slice is emitted. Each slice is new and owned by the receiver.
//
// The upstream and the full slices run on the delivering goroutine; a
// slice cut by the timer is delivered on the timer's goroutine (one
// time.AfterFunc per slice, joined before BufferTimeout returns), the two
// taking turns through a one-slot channel, so slices reach the downstream
// one at a time and the upstream waits while a timed slice is delivered.
// On an error or cancellation the partial slice goes to the discard hook
// (DoOnDiscard) with the reason. Costs per slice: the slice, one
// timer and one closure; per item, one uncontended channel send and
// receive. n < 1 or d <= 0 gives ErrInvalidArgument.
func BufferTimeout[T any](f Flux[T], n int, d time.Duration) Flux[[]T] {
	switch {
	case n < 1:
		return Error[[]T](invalid("BufferTimeout", "size below 1"))
	case d <= 0:
		return Error[[]T](invalid("BufferTimeout", "duration not positive"))
	}
	return Flux[[]T]{subscribe: func(ctx context.Context, emit func([]T) error) error {
		uctx, stop := context.WithCancelCause(ctx)
		b := &batcher[T]{aside: newAside[T]("BufferTimeout", uctx, stop, emit), n: n, d: d}
		// On every exit, a runtime.Goexit of the downstream included: stop
		// the timer, end the upstream's context (a timer's goroutine
		// waiting for the lock gives up), join the timer's goroutine.
		defer b.alarm.wait()
		defer stop(nil)
		defer b.alarm.disarm()
		uerr := f.run(uctx, b.next)
		return settle(&b.aside, &b.alarm, uerr, func() ([]T, []T) {
			rest := b.cut()
			return rest, rest
		})
	}}
}

// batcher is the state of one BufferTimeout subscription, guarded by lock
// (taken by the upstream's goroutine and the timer's).
type batcher[T any] struct {
	aside[T, []T]
	n     int
	d     time.Duration
	alarm alarm
	buf   []T
	batch uint64 // the number of the slice in buf; a timer of another is stale
}

func (b *batcher[T]) next(v T) error {
	if err := b.enter(v); err != nil {
		return err
	}
	if b.buf == nil {
		b.buf = make([]T, 0, b.n)
	}
	b.buf = append(b.buf, v)
	if len(b.buf) < b.n {
		if len(b.buf) == 1 {
			batch := b.batch
			b.alarm.arm(b.d, func() { b.expire(batch) })
		}
		b.lock.give()
		return nil
	}
	b.alarm.disarm()
	err := b.emit(b.cut())
	b.lock.give()
	return err
}

// cut takes the slice out, making any timer of it stale. Under lock.
func (b *batcher[T]) cut() []T {
	out := b.buf
	b.buf = nil
	b.batch++
	return out
}

// expire delivers slice number batch when its time is up, on the timer's
// goroutine, unless it was already cut or the flow is ending (settle then
// handles it).
func (b *batcher[T]) expire(batch uint64) {
	if b.lock.take(b.uctx) != nil {
		return
	}
	defer b.lock.give()
	if batch != b.batch || len(b.buf) == 0 || b.err != nil || b.uctx.Err() != nil {
		return
	}
	b.deliver(b.cut())
}

// settle ends a flow whose items a timer may deliver (BufferTimeout,
// Debounce) once its upstream returned uerr: it disarms the alarm, lets a
// delivery of the timer's in progress finish, takes what is held with take
// (what to emit, and the items that make it), joins the timer's goroutine,
// then delivers that on completion or discards its items with the reason.
func settle[T, R any](a *aside[T, R], al *alarm, uerr error, take func() (R, []T)) error {
	al.disarm()
	a.lock.hold() // a delivery of the timer's finishes first
	r, rest := take()
	a.lock.give()
	al.wait()
	return a.end(uerr, rest, func() error { return a.emit(r) })
}
