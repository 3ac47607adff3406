package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/flux"
)

// Mailbox is an unbounded FIFO queue whose Flux is a dispatcher's source:
// the way for handlers to feed follow-up exchanges back into their own
// dispatcher without deadlock. Push never blocks, so a handler never waits
// on the dispatcher it runs in.
//
// Why a bounded source deadlocks: the dispatcher pulls from its source only
// while its pending budget has room, and room comes back only when handlers
// return. A handler that pushes into a full bounded source (a channel, or
// Emit on its own dispatcher) waits for the intake; the intake waits for
// budget, which waits for the handler. Nothing moves again. The Mailbox breaks the cycle by never waiting; the
// price is memory: while handlers produce follow-ups faster than they are
// handled, the queue grows without bound (Len tells how far).
//
// The zero value is an empty, open Mailbox, as NewMailbox returns. All
// methods are safe for concurrent use. The Mailbox starts no goroutine.
type Mailbox[T any] struct {
	mu         sync.Mutex
	queue      []T
	head       int
	closed     bool
	subscribed bool          // a subscription of Flux runs
	wake       chan struct{} // signalled on Push; made on first use
	done       chan struct{} // closed by Close; made on first use
}

// NewMailbox returns an empty, open Mailbox.
func NewMailbox[T any]() *Mailbox[T] {
	return &Mailbox[T]{}
}

// chansLocked returns the wake and done channels, making them on first use
// so that the zero value works. m.mu is held.
func (m *Mailbox[T]) chansLocked() (wake, done chan struct{}) {
	if m.wake == nil {
		m.wake, m.done = make(chan struct{}, 1), make(chan struct{})
	}
	return m.wake, m.done
}

// Push appends x. It never blocks; after Close it returns an error wrapping
// ErrStopped and x is not queued.
func (m *Mailbox[T]) Push(x T) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("%w: mailbox closed", ErrStopped)
	}
	m.queue = append(m.queue, x)
	wake, _ := m.chansLocked()
	m.mu.Unlock()
	signal(wake)
	return nil
}

// Close refuses later pushes; the running subscription of the Flux, if any,
// completes once it delivered what is queued, and so does any later one.
// Idempotent.
func (m *Mailbox[T]) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	_, done := m.chansLocked()
	close(done)
}

// Len returns the number of queued exchanges.
func (m *Mailbox[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue) - m.head
}

func signal(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// pop removes the first exchange, waiting for one; ok is false once the
// Mailbox is closed and empty (err nil) or ctx ended (err its cause).
func (m *Mailbox[T]) pop(ctx context.Context) (x T, ok bool, err error) {
	for {
		m.mu.Lock()
		if m.head < len(m.queue) {
			x = m.queue[m.head]
			var zero T
			m.queue[m.head] = zero
			m.head++
			if m.head >= 32 && 2*m.head >= len(m.queue) {
				// Reuse the dead front: amortised O(1), memory bounded by
				// twice the longest backlog.
				n := copy(m.queue, m.queue[m.head:])
				clear(m.queue[n:])
				m.queue, m.head = m.queue[:n], 0
			}
			m.mu.Unlock()
			return x, true, nil
		}
		closed := m.closed
		wake, done := m.chansLocked()
		m.mu.Unlock()
		if closed {
			return x, false, nil
		}
		select {
		case <-wake:
		case <-done:
		case <-ctx.Done():
			return x, false, context.Cause(ctx)
		}
	}
}

// unpop puts x back at the head: it was popped but not delivered.
func (m *Mailbox[T]) unpop(x T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head > 0 {
		m.head--
		m.queue[m.head] = x
		return
	}
	m.queue = append([]T{x}, m.queue...)
}

// Flux returns the source that delivers the queued exchanges in push order
// and completes after Close once the queue is empty. It serves one
// subscription at a time (a dispatcher subscribes once): subscribed while
// another subscription runs, it fails at once with an error wrapping
// ErrSubscribed, since two subscribers would share the exchanges and lose
// their order. When the subscription ends early (ctx, or the subscriber
// stops), the exchanges not delivered stay queued for the next one; an
// exchange is removed from the queue only when the subscriber took it: one
// the sink refused (flux.ErrNotDelivered) goes back to the head.
func (m *Mailbox[T]) Flux() flux.Flux[T] {
	return flux.Create(func(ctx context.Context, sink flux.Sink[T]) error {
		if err := m.subscribe(); err != nil {
			return err
		}
		defer m.unsubscribe()
		for {
			x, ok, err := m.pop(ctx)
			if !ok {
				return err
			}
			if err := sink.Next(x); err != nil {
				if errors.Is(err, flux.ErrNotDelivered) {
					m.unpop(x)
				}
				return err
			}
		}
	})
}

// subscribe marks a subscription of Flux running, or fails with
// ErrSubscribed if one already is.
func (m *Mailbox[T]) subscribe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subscribed {
		return fmt.Errorf("%w: a subscription of this mailbox is running", ErrSubscribed)
	}
	m.subscribed = true
	return nil
}

func (m *Mailbox[T]) unsubscribe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subscribed = false
}
