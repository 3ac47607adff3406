package dispatch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/flux"
)

// Results is the stream of one dispatcher's outcomes: one Result per
// exchange received, in the order the exchanges ended (within a group, the
// group's order), completed when the dispatcher reached its end (Done). It
// is read as a Flux, an rxgo Observable or an iter.Seq2, by one reader at a
// time.
//
// Backpressure and its bound: a Result waits in a buffer of the size given
// to NewResults; while the buffer is full, the goroutine that ended the
// exchange waits for the reader, so a slow reader slows the handlers of the
// dispatcher (their groups wait). A reader that stops reading without
// ending its subscription holds the dispatcher until its handlers' context
// ends: a ForceStop, which Run and Runtime apply once their stop timeout
// passed, so a graceful stop is bounded by that timeout; from then on
// Results that find the buffer full are dropped and counted (Dropped). A
// subscription that ended before the dispatcher did (a cancelled ctx, a
// break out of All) abandons the stream: the Results buffered and to come
// are dropped and counted, and nothing waits for a reader any more.
type Results[T any] struct {
	ch         chan Result[T]
	abandoned  chan struct{}
	abandon    sync.Once
	attached   atomic.Bool
	subscribed atomic.Bool
	dropped    atomic.Int64
}

// NewResults returns a Results with room for buffer Results (at least 0: 0
// hands each Result straight to the reader). Attach it to one dispatcher
// with WithResults. A negative buffer returns ErrInvalidArgument.
func NewResults[T any](buffer int) (*Results[T], error) {
	if buffer < 0 {
		return nil, fmt.Errorf("%w: results buffer %d is negative", ErrInvalidArgument, buffer)
	}
	return &Results[T]{ch: make(chan Result[T], buffer), abandoned: make(chan struct{})}, nil
}

// WithResults sends every exchange's Result to r (an outcome hook, see
// WithOutcomeHook) and completes r at the dispatcher's end. A Results serves
// one dispatcher: given to a second one, or nil, it is an invalid option.
func WithResults[T any](r *Results[T]) Option[T] {
	return func(c *config[T]) {
		if r == nil || !r.attached.CompareAndSwap(false, true) {
			c.reject("a Results is nil or attached to another dispatcher")
			return
		}
		c.outcomes = append(c.outcomes, r.send)
		c.ends = append(c.ends, r.complete)
	}
}

// send is the outcome hook: it waits for room, or drops once the handlers'
// context ended or the reader abandoned the stream.
func (r *Results[T]) send(ctx context.Context, res Result[T]) {
	select {
	case <-r.abandoned:
		r.dropped.Add(1)
		return
	case r.ch <- res:
		return
	default:
	}
	select {
	case r.ch <- res:
	case <-ctx.Done():
		r.dropped.Add(1)
	case <-r.abandoned:
		r.dropped.Add(1)
	}
}

// complete runs at the dispatcher's end, when no send runs any more.
func (r *Results[T]) complete() { close(r.ch) }

// Dropped returns how many Results were dropped (see Results): those
// counted, and once the stream was abandoned, those left in the buffer by a
// send that raced with the abandonment.
func (r *Results[T]) Dropped() int64 {
	n := r.dropped.Load()
	select {
	case <-r.abandoned:
		n += int64(len(r.ch))
	default:
	}
	return n
}

// Flux returns the stream as a Flux: it emits the Results, then completes
// at the dispatcher's end, or ends with its ctx's cause. It is unicast: a
// second subscription, while or after one ran, fails with ErrSubscribed.
// A subscription that ends before the dispatcher's end abandons the stream.
func (r *Results[T]) Flux() flux.Flux[Result[T]] {
	return flux.Create(func(ctx context.Context, sink flux.Sink[Result[T]]) error {
		if !r.subscribed.CompareAndSwap(false, true) {
			return fmt.Errorf("%w: a dispatcher's Results are read once", ErrSubscribed)
		}
		defer r.drop()
		for {
			select {
			case res, ok := <-r.ch:
				if !ok {
					return nil
				}
				if err := sink.Next(res); err != nil {
					if errors.Is(err, flux.ErrNotDelivered) {
						r.dropped.Add(1)
					}
					return err
				}
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	})
}

// drop abandons the stream and counts what the buffer still holds.
func (r *Results[T]) drop() {
	r.abandon.Do(func() { close(r.abandoned) })
	for {
		select {
		case _, ok := <-r.ch:
			if !ok {
				return
			}
			r.dropped.Add(1)
		default:
			return
		}
	}
}

// Observable returns the stream as an rxgo Observable of Result[T] items
// (see flux.Flux.Observable), observed once.
func (r *Results[T]) Observable(ctx context.Context) rxgo.Observable { return r.Flux().Observable(ctx) }

// All returns the stream as an iterator of Results, with the stream's error
// as the last pair (see flux.Flux.All). Breaking out of the loop abandons
// the stream.
func (r *Results[T]) All(ctx context.Context) iter.Seq2[Result[T], error] { return r.Flux().All(ctx) }
