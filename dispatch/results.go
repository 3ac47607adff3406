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
// time: a unicast sink of outcomes.
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
	return hook("WithResults", func(c *config[T]) {
		if r == nil || !r.attached.CompareAndSwap(false, true) {
			c.reject("a Results is nil or attached to another dispatcher")
			return
		}
		c.outcomes = append(c.outcomes, r.send)
		c.ends = append(c.ends, r.complete)
	})
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
// A Result that the downstream refuses with flux.ErrNotDelivered is counted
// in Dropped; Observable and All count exactly what they did not hand over.
func (r *Results[T]) Flux() flux.Flux[Result[T]] {
	return flux.Create(func(ctx context.Context, sink flux.Sink[Result[T]]) error {
		if err := r.subscribe(); err != nil {
			return err
		}
		defer r.drop()
		for {
			res, ok, err := r.next(ctx)
			if !ok {
				return err
			}
			if err := sink.Next(res); err != nil {
				if errors.Is(err, flux.ErrNotDelivered) {
					r.dropped.Add(1)
				}
				return err
			}
		}
	})
}

// subscribe claims the stream's one reading.
func (r *Results[T]) subscribe() error {
	if !r.subscribed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: a dispatcher's Results are read once", ErrSubscribed)
	}
	return nil
}

// next waits for the next Result; ok is false at the stream's end (err nil)
// or once ctx ended (err its cause).
func (r *Results[T]) next(ctx context.Context) (res Result[T], ok bool, err error) {
	select {
	case res, ok = <-r.ch:
		return res, ok, nil
	case <-ctx.Done():
		return res, false, context.Cause(ctx)
	}
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

// Observable returns the stream as a cold rxgo Observable of Result[T]
// items (as flux.Flux.Observable would), observed once: a second
// observation gets ErrSubscribed as its error item. It is bounded by ctx
// and by the observer's rxgo.WithContext, whose end ends it without an
// error item: an observer that stops reading must cancel one of them, and
// the Result it was being handed then is counted in Dropped.
func (r *Results[T]) Observable(ctx context.Context) rxgo.Observable {
	return rxgo.Defer([]rxgo.Producer{func(pctx context.Context, next chan<- rxgo.Item) {
		sctx, cancel := context.WithCancelCause(pctx)
		defer cancel(nil)
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		defer stop()
		for res, err := range r.All(sctx) {
			if err != nil {
				if sctx.Err() == nil { // ErrSubscribed; a ctx's end is no item
					rxgo.Error(err).SendContext(sctx, next)
				}
				return
			}
			if !rxgo.Of(res).SendContext(sctx, next) {
				r.dropped.Add(1) // taken from the buffer, never handed over
				return
			}
		}
	}}, rxgo.WithContext(ctx))
}

// All returns the stream as an iterator of Results, with the stream's error
// (ErrSubscribed, or ctx's cause) as the last pair. It runs on the caller's
// goroutine, and starts none. Breaking out of the loop abandons the stream.
func (r *Results[T]) All(ctx context.Context) iter.Seq2[Result[T], error] {
	return func(yield func(Result[T], error) bool) {
		if err := r.subscribe(); err != nil {
			yield(Result[T]{}, err)
			return
		}
		defer r.drop()
		for {
			res, ok, err := r.next(ctx)
			if !ok {
				if err != nil {
					yield(Result[T]{}, err)
				}
				return
			}
			if !yield(res, nil) {
				return
			}
		}
	}
}
