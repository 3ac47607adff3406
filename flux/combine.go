package flux

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/aggflow/aggflow/component"
)

// The combining operators: Concat runs its sources one after another on the
// subscribing goroutine; Merge, Zip and CombineLatest run each source on a
// goroutine of its own, push its items into a queue of theirs (32 items per
// source, see LimitRate) and deliver downstream from the subscribing
// goroutine, one item at a time. Whatever ends the subscription, they cancel
// the sources, give what the queues still hold to the discard hook and join
// every goroutine before Subscribe returns.

// Merge subscribes every source at once and emits their items as they
// arrive, interleaved; the items of each source keep their order. It
// completes once every source completed. The first error, of a source or of
// the downstream, ends the flow and cancels the other sources; a source's
// error comes after the items it pushed before it, and the items of the
// other sources still queued go to the discard hook. Each source runs on a
// goroutine of its own, even a synchronous one, pushing into a queue shared
// by all (32 items per source, see LimitRate); items reach the downstream
// on the subscribing goroutine. No source: Empty; one source: that source
// itself. Costs one goroutine per source and subscription, and one channel
// send and receive per item (no allocation).
func Merge[T any](fs ...Flux[T]) Flux[T] { return merge("Merge", fs, false) }

// MergeDelayError is Merge where an error of a source cancels nothing: the
// other sources run to their end, and the errors are signalled after every
// source ended and every item was delivered (one error as it is, several
// joined with errors.Join, in the order they arrived). An error of the
// downstream, or the end of ctx, still cancels everything at once.
func MergeDelayError[T any](fs ...Flux[T]) Flux[T] { return merge("MergeDelayError", fs, true) }

// mergeMsg is what a source of Merge puts in the shared queue: an item, or
// its end (with its error), which so follows its items.
type mergeMsg[T any] struct {
	v   T
	end bool
	err error
}

func merge[T any](op string, fs []Flux[T], delayError bool) Flux[T] {
	one, fs := few(fs)
	if fs == nil {
		return one
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) (err error) {
		prefetch, sctx := prefetchOf(ctx)
		discard := discarder[T](ctx)
		c := newCrew(sctx)
		q := make(chan mergeMsg[T], prefetch*len(fs))
		push := func(v T) error {
			if err := send(c.ctx, q, mergeMsg[T]{v: v}); err != nil {
				discard(v, err)
				return err
			}
			return nil
		}
		for _, f := range fs {
			// The end is sent without a way out: the loop or the cleanup
			// below receives until every source ended.
			spawn(c, op, f, push, func(err error) { q <- mergeMsg[T]{end: true, err: err} })
		}
		live := len(fs)
		defer func() {
			reason := reasonOf(err)
			c.cancel(reason)
			for live > 0 {
				if m := <-q; m.end {
					live--
				} else {
					discard(m.v, reason)
				}
			}
			c.wg.Wait()
		}()
		var errs []error
		for live > 0 {
			m := <-q
			switch {
			case !m.end:
				if err := emit(m.v); err != nil {
					return err
				}
			case m.err == nil:
				live--
			case !delayError || ctx.Err() != nil:
				live--
				return m.err
			default:
				live--
				errs = append(errs, m.err)
			}
		}
		return joinErrors(errs)
	}}
}

// Concat subscribes the sources one after another, each once the previous
// completed, and emits their items in that order; the first error ends the
// flow without subscribing the rest. Everything runs on the subscribing
// goroutine, fused: no goroutine, no allocation per item. No source: Empty;
// one source: that source itself.
func Concat[T any](fs ...Flux[T]) Flux[T] { return concat(fs, false) }

// ConcatDelayError is Concat where the error of a source does not stop the
// sources after it: they are subscribed in turn, and the errors are signalled
// at the end (one as it is, several joined with errors.Join). An error of the
// downstream, or the end of ctx, still stops at once.
func ConcatDelayError[T any](fs ...Flux[T]) Flux[T] { return concat(fs, true) }

func concat[T any](fs []Flux[T], delayError bool) Flux[T] {
	one, fs := few(fs)
	if fs == nil {
		return one
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		var errs []error
		for _, f := range fs {
			if err := ctxDone(ctx); err != nil {
				return err
			}
			if !delayError {
				if err := f.run(ctx, emit); err != nil {
					return err
				}
				continue
			}
			switch sig, err := f.observe(ctx, emit); sig {
			case SignalCancel:
				return err
			case SignalError:
				errs = append(errs, err)
			}
		}
		return joinErrors(errs)
	}}
}

// Zip subscribes a and b at once and emits fn(x, y) for each pair of their
// items taken in order: the first of a with the first of b, and so on. It
// completes as soon as one source completed and no item of it is left to
// pair, cancelling the other, so it stops at the shortest; the items then
// left over go to the discard hook with ErrCancelled. The first error, of a
// source, of fn (a panic) or of the downstream, ends the flow at once and
// cancels both. Each source runs on a goroutine of its own and may run up
// to 32 items ahead of the other (see LimitRate); fn and the downstream run
// on the subscribing goroutine. Costs two goroutines per subscription and
// one channel send and receive per item. fn nil gives ErrInvalidArgument.
func Zip[A, B, R any](a Flux[A], b Flux[B], fn func(A, B) R) Flux[R] {
	if fn == nil {
		return Error[R](invalid("Zip", "nil function"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		return runDuo(ctx, "Zip", a, b, func(d *duo[A, B]) error {
			for {
				// Items waiting are taken without the dearer blocking select.
				if d.a.poll() {
					return d.end(d.a.err)
				}
				if d.b.poll() {
					return d.end(d.b.err)
				}
				if !d.a.held || !d.b.held {
					select {
					case v, ok := <-d.a.next():
						if !ok {
							return d.end(d.a.err)
						}
						d.a.v, d.a.held = v, true
					case v, ok := <-d.b.next():
						if !ok {
							return d.end(d.b.err)
						}
						d.b.v, d.b.held = v, true
					}
				}
				if d.a.held && d.b.held {
					if err := pass(d, fn, emit); err != nil {
						return err
					}
				}
			}
		})
	}}
}

// CombineLatest subscribes a and b at once and, once both emitted, emits
// fn(latest of a, latest of b) each time either emits. It completes when
// both completed, or at once when one completed without an item (no
// combination can ever be made). The first error, of a source, of fn (a
// panic) or of the downstream, ends the flow at once and cancels both. A
// latest item replaced before it took part in a combination (a's items
// before b's first) goes to the discard hook with ErrSuperseded, and one
// held unused when the flow ends with the flow's reason. Sources run on goroutines of their own; fn and the
// downstream on the subscribing one. Costs two goroutines per subscription
// and one channel send and receive per item. fn nil gives
// ErrInvalidArgument.
func CombineLatest[A, B, R any](a Flux[A], b Flux[B], fn func(A, B) R) Flux[R] {
	if fn == nil {
		return Error[R](invalid("CombineLatest", "nil function"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		return runDuo(ctx, "CombineLatest", a, b, func(d *duo[A, B]) error {
			for d.a.in != nil || d.b.in != nil {
				var done bool
				var err error
				select {
				case v, ok := <-d.a.in:
					done, err = d.a.latest(d.crew, v, ok)
				case v, ok := <-d.b.in:
					done, err = d.b.latest(d.crew, v, ok)
				}
				if done {
					return err
				}
				if d.a.seen && d.b.seen && (d.a.held || d.b.held) {
					if err := pass(d, fn, emit); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}}
}

// few is what an operator over fs is when fs has no source (Empty) or one
// (that source), with nil; else the zero Flux and a copy of fs to keep.
func few[T any](fs []Flux[T]) (Flux[T], []Flux[T]) {
	switch len(fs) {
	case 0:
		return Empty[T](), nil
	case 1:
		return fs[0], nil
	}
	return Flux[T]{}, slices.Clone(fs)
}

// joinErrors is nil, the one error, or all of them joined.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// crew is the goroutines of one subscription of an asynchronous combining
// operator, under a context whose cancellation cause is the flow's first
// failure (or the reason the operator stopped them).
type crew struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
}

func newCrew(ctx context.Context) *crew {
	c := &crew{}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	return c
}

// end is the result of a flow whose source ended with err: the first
// failure if the crew was cancelled (the error of a source, the end of the
// subscription's context), else err.
func (c *crew) end(err error) error {
	if cause := ctxDone(c.ctx); cause != nil {
		return cause
	}
	return err
}

// spawn runs f with emit on a goroutine of the crew, then calls end with its
// result. A panic that escaped f becomes *PanicError and a runtime.Goexit an
// error naming op, so end is called on every path, before wg is done.
func spawn[T any](c *crew, op string, f Flux[T], emit func(T) error, end func(error)) {
	c.wg.Add(1)
	component.Go(func() error { return runCaught(f, c.ctx, emit) }, func(err error) {
		defer c.wg.Done()
		end(exitedAs(op, err))
	})
}

// send puts m in ch, waiting while ch is full unless ctx ends first (then it
// returns the cause of ctx). A free slot is taken without the dearer
// two-way select.
func send[M any](ctx context.Context, ch chan<- M, m M) error {
	select {
	case ch <- m:
		return nil
	default:
	}
	select {
	case ch <- m:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// lane is one source of Zip or CombineLatest, run by a crew into a queue of
// its own. ch is closed once the source ended; err, its result, may be read
// after that.
type lane[T any] struct {
	ch      chan T
	err     error
	discard func(T, error)
}

// startLane runs f into a new lane of prefetch items. An error of f cancels
// the crew with it as the cause; an item refused because the crew was
// cancelled goes to discard.
func startLane[T any](c *crew, op string, f Flux[T], prefetch int, discard func(T, error)) *lane[T] {
	l := &lane[T]{ch: make(chan T, prefetch), discard: discard}
	spawn(c, op, f, func(v T) error {
		if err := send(c.ctx, l.ch, v); err != nil {
			discard(v, err)
			return err
		}
		return nil
	}, func(err error) {
		if err != nil {
			c.cancel(err)
		}
		l.err = err
		close(l.ch)
	})
	return l
}

// drain discards what is left in l until its source ended.
func (l *lane[T]) drain(reason error) {
	for v := range l.ch {
		l.discard(v, reason)
	}
}

// side is a lane of Zip or CombineLatest as their loop sees it: in is the
// lane's channel until it closed, and v the item taken from it, held until
// a combination used it. seen tells that v is CombineLatest's latest item,
// used or not.
type side[T any] struct {
	*lane[T]
	in   <-chan T
	v    T
	held bool
	seen bool
}

// next is where Zip takes the next item of s from: nowhere while one is held.
func (s *side[T]) next() <-chan T {
	if s.held {
		return nil
	}
	return s.in
}

// poll takes the next item of s for Zip if s holds none and one is waiting,
// without blocking; it reports whether the lane closed instead.
func (s *side[T]) poll() (closed bool) {
	if s.held {
		return false
	}
	select {
	case v, ok := <-s.in:
		if !ok {
			return true
		}
		s.v, s.held = v, true
	default:
	}
	return false
}

// latest handles what CombineLatest received from s: a new latest item (the
// one it replaces is discarded if it was never used), or the end of the
// source, which ends the flow (done) if it is an error or if s never had an
// item: no combination can then be made.
func (s *side[T]) latest(c *crew, v T, ok bool) (done bool, err error) {
	if !ok {
		s.in = nil
		err = c.end(s.err)
		return err != nil || !s.seen, err
	}
	if s.held {
		s.discard(s.v, ErrSuperseded)
	}
	s.v, s.held, s.seen = v, true, true
	return false, nil
}

// release discards the held item and what is left in the lane, waiting
// until its source ended.
func (s *side[T]) release(reason error) {
	if s.held {
		s.discard(s.v, reason)
	}
	s.drain(reason)
}

// duo is one subscription of Zip or CombineLatest.
type duo[A, B any] struct {
	*crew
	a side[A]
	b side[B]
}

// pass emits fn of both held items, which are then used.
func pass[A, B, R any](d *duo[A, B], fn func(A, B) R, emit func(R) error) error {
	d.a.held, d.b.held = false, false
	r, err := call2(fn, d.a.v, d.b.v)
	if err != nil {
		return err
	}
	return emit(r)
}

// runDuo runs fa and fb on lanes and loop on the subscribing goroutine.
// Whatever ends loop (its return, a panic or a runtime.Goexit of the
// downstream), the lanes are cancelled, the items held and queued go to the
// discard hooks with the flow's reason, and both goroutines are joined
// before runDuo returns loop's result.
func runDuo[A, B any](ctx context.Context, op string, fa Flux[A], fb Flux[B], loop func(*duo[A, B]) error) (err error) {
	prefetch, sctx := prefetchOf(ctx)
	d := &duo[A, B]{crew: newCrew(sctx)}
	d.a.lane = startLane(d.crew, op, fa, prefetch, discarder[A](ctx))
	d.b.lane = startLane(d.crew, op, fb, prefetch, discarder[B](ctx))
	d.a.in, d.b.in = d.a.ch, d.b.ch
	defer func() {
		reason := reasonOf(err)
		d.cancel(reason)
		d.a.release(reason)
		d.b.release(reason)
		d.wg.Wait()
	}()
	return loop(d)
}
