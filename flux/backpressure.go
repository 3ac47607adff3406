package flux

import (
	"context"
	"fmt"
	"sync"
)

// BufferOverflow is what OnBackpressureBuffer does with an item that finds
// its buffer full.
type BufferOverflow int

const (
	// OverflowError discards the item and fails the flow with an error
	// wrapping ErrOverflow once the buffered items were delivered; the
	// upstream is cancelled.
	OverflowError BufferOverflow = iota
	// OverflowDropOldest discards the oldest buffered item and buffers the
	// new one.
	OverflowDropOldest
	// OverflowDropLatest discards the new item.
	OverflowDropLatest
)

// OnBackpressureBuffer runs f on a goroutine of its own that never waits for
// the downstream: its items go to a buffer of up to n, from which the
// subscribing goroutine delivers them in order. An item that finds the
// buffer full is handled by overflow; each dropped item goes to the discard
// hook (DoOnDiscard) with ErrOverflow. An error of f reaches the downstream
// after the buffered items (as PublishOn's delayError). When the flow ends
// otherwise (the downstream returned an error or stopped early, ctx ended),
// the upstream's context is cancelled, its goroutine joined before
// Subscribe returns, and the buffered items, like any item it pushes after,
// go to the discard hook with the reason.
//
// Use it where a producer must not be slowed by its consumer (a Create
// that reads a socket, a ticker): everywhere else the blocking emit is the
// backpressure. Memory: up to about 2n items; per item a mutex hand-off.
// n < 1 or an unknown overflow gives ErrInvalidArgument.
func (f Flux[T]) OnBackpressureBuffer(n int, overflow BufferOverflow) Flux[T] {
	const op = "OnBackpressureBuffer"
	switch {
	case n < 1:
		return Error[T](invalid(op, "size below 1"))
	case overflow < OverflowError || overflow > OverflowDropLatest:
		return Error[T](invalid(op, fmt.Sprintf("unknown overflow %d", overflow)))
	}
	return f.backpressure(op, n, overflow)
}

// OnBackpressureDrop runs f on a goroutine of its own and hands an item to
// the downstream only if the downstream is waiting for one; an item that
// arrives while the downstream still handles the previous one goes to the
// discard hook with ErrOverflow. Goroutine and stop rules: as
// OnBackpressureBuffer.
func (f Flux[T]) OnBackpressureDrop() Flux[T] {
	return f.backpressure("OnBackpressureDrop", 0, OverflowDropLatest)
}

// OnBackpressureLatest runs f on a goroutine of its own and keeps only the
// latest item not yet taken by the downstream: an item replaced by a newer
// one before the downstream took it goes to the discard hook with
// ErrOverflow. Goroutine and stop rules: as OnBackpressureBuffer.
func (f Flux[T]) OnBackpressureLatest() Flux[T] {
	return f.backpressure("OnBackpressureLatest", 1, OverflowDropOldest)
}

func (f Flux[T]) backpressure(op string, n int, overflow BufferOverflow) Flux[T] {
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) (err error) {
		q := &bpQueue[T]{
			size: n, overflow: overflow, discard: discarder[T](ctx),
			full:    fmt.Errorf("flux: %s: %d items buffered: %w", op, n, ErrOverflow),
			wake:    make(chan struct{}, 1),
			waiting: true, // subscribed, the downstream wants its first item
		}
		c := newCrew(ctx)
		spawn(c, op, f, q.push, q.end)
		defer func() {
			reason := reasonOf(err)
			c.cancel(reason)
			for _, v := range q.close(reason) {
				q.discard(v, reason)
			}
			c.wg.Wait()
		}()
		for {
			v, ok, end := q.take()
			switch {
			case ok:
				if err := emit(v); err != nil {
					return err
				}
				continue
			case end:
				return q.err
			}
			select {
			case <-q.wake:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}}
}

// bpQueue is the buffer between the upstream's goroutine (push, end) and the
// subscribing goroutine (take, close).
type bpQueue[T any] struct {
	size     int // 0: hand-off to a waiting downstream only
	overflow BufferOverflow
	discard  func(T, error)
	full     error         // the error signal of OverflowError
	wake     chan struct{} // a token when waiting and an item or the end arrived

	mu      sync.Mutex
	items   []T
	waiting bool  // the downstream waits in take's caller
	ended   bool  // no item is buffered after this
	err     error // the terminal signal, once ended
	closed  error // the downstream is gone, with this reason
}

func (q *bpQueue[T]) push(v T) error {
	q.mu.Lock()
	if q.closed != nil || q.ended {
		reason := q.closed
		if reason == nil {
			reason = q.err
		}
		q.mu.Unlock()
		q.discard(v, reason)
		return reason
	}
	if len(q.items) < q.size || len(q.items) == 0 && q.waiting {
		q.items = append(q.items, v)
		q.signalLocked()
		q.mu.Unlock()
		return nil
	}
	switch q.overflow {
	case OverflowDropOldest:
		old := q.items[0]
		var zero T
		q.items[0] = zero
		q.items = append(q.items[1:], v)
		q.mu.Unlock()
		q.discard(old, ErrOverflow)
		return nil
	case OverflowDropLatest:
		q.mu.Unlock()
		q.discard(v, ErrOverflow)
		return nil
	}
	q.ended, q.err = true, q.full
	q.signalLocked()
	q.mu.Unlock()
	q.discard(v, q.full)
	return q.full
}

// end records the upstream's terminal signal, unless an overflow came first.
func (q *bpQueue[T]) end(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.ended {
		q.ended, q.err = true, err
		q.signalLocked()
	}
}

func (q *bpQueue[T]) signalLocked() {
	if q.waiting {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// take returns the oldest item (ok), or end once the terminal signal follows
// the last item, or neither: the caller then waits for wake.
func (q *bpQueue[T]) take() (v T, ok, end bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 {
		var zero T
		v, q.items[0] = q.items[0], zero
		q.items = q.items[1:]
		q.waiting = false
		return v, true, false
	}
	q.waiting = !q.ended
	return v, false, q.ended
}

// close refuses every later push and returns the items left.
func (q *bpQueue[T]) close(reason error) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = reason
	left := q.items
	q.items = nil
	return left
}
