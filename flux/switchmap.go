package flux

import (
	"context"
	"fmt"
	"sync"
)

// errSwitched is the cause with which SwitchMap cancels an inner when the
// next item arrives; what the inner pushes after it is discarded with it.
var errSwitched = fmt.Errorf("flux: SwitchMap: switched to the next inner: %w", ErrSuperseded)

// SwitchMap maps each item to an inner Flux and emits the items of the
// latest inner only: an item arriving cancels the current inner, whose
// items pushed after that go to the discard hook with an error wrapping
// ErrSuperseded, and the next inner is subscribed once the cancelled one
// returned. It completes when the upstream and the last inner completed;
// the first error, of the upstream, an inner, fn (a panic) or the
// downstream, cancels everything else and ends the flow.
//
// A synchronous flux is one known to push all its items on the
// subscribing goroutine, waiting for nothing but the downstream: Just,
// FromSlice, Range, Empty, Error, and Map, Filter, DoOnNext, Take, Skip,
// DoOnDiscard and OnErrorContinue over one. A synchronous inner runs to
// its end (or the flow's) before the next item of the upstream is taken;
// any other inner is switched away from by the next item. So
// Just(1, 2, 3) mapped to Range(v, 3) gives 1 2 3 2 3 4 3 4 5, every time.
//
// When the upstream is synchronous, its next item exists only once it is
// pulled, and SwitchMap runs on the subscribing goroutine: fn runs there, a
// synchronous inner runs at once, and any other inner waits for the next
// item, which replaces it unsubscribed, so only the last of a run of them
// is subscribed, once the upstream completed. No goroutine, and nothing
// allocated but by fn and the inners.
//
// Otherwise the upstream runs on a goroutine of the subscription, and fn
// runs there; it waits for the synchronous inners only. The inners run one
// after another on the subscribing goroutine, which delivers their items.
// An inner replaced by a newer item before its turn came is never
// subscribed. Costs one goroutine per subscription, and per upstream item
// a context, a mutex-guarded hand-over and, when the subscribing goroutine
// waits for it, a wake-up (two for a synchronous inner). fn nil gives
// ErrInvalidArgument.
func SwitchMap[T, R any](f Flux[T], fn func(T) Flux[R]) Flux[R] {
	if fn == nil {
		return Error[R](invalid("SwitchMap", "nil function"))
	}
	if f.synchronous() {
		return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
			return switchInline(ctx, f, fn, emit)
		}}
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) (err error) {
		s := &switchBox[R]{crew: newCrew(ctx), ready: make(chan struct{}, 1), ran: make(chan struct{}, 1)}
		defer func() {
			s.cancel(reasonOf(err))
			s.wg.Wait()
		}()
		cont, refuse := continuationOf[T](ctx), discarder[T](ctx)
		spawn(s.crew, "SwitchMap", f, func(v T) error {
			if err := ctxDone(s.ctx); err != nil {
				refuse(v, err) // an upstream item after the end
				return err
			}
			inner, err := call1(fn, v)
			if err != nil {
				return cont.resume(v, err)
			}
			s.offer(inner)
			if inner.synchronous() {
				// It runs to its end before the next item is taken.
				select {
				case <-s.ran:
				case <-s.ctx.Done():
				}
			}
			return nil
		}, s.upstreamEnded)
		return s.deliver(emit, discarder[R](ctx))
	}}
}

// switchInline is SwitchMap over a synchronous upstream, on the subscribing
// goroutine: a synchronous inner runs at once to its end; any other is held
// until the next item replaces it or the upstream completes.
func switchInline[T, R any](ctx context.Context, f Flux[T], fn func(T) Flux[R], emit func(R) error) error {
	cont := continuationOf[T](ctx)
	var held Flux[R]
	holding := false
	err := f.run(ctx, func(v T) error {
		inner, err := call1(fn, v)
		if err != nil {
			return cont.resume(v, err)
		}
		if holding = !inner.synchronous(); holding {
			held = inner
			return nil
		}
		return inner.run(ctx, emit)
	})
	if err != nil || !holding {
		return err
	}
	return held.run(ctx, emit)
}

// switchBox hands the latest inner of a SwitchMap subscription from the
// upstream's goroutine to the subscribing one.
type switchBox[R any] struct {
	*crew
	ready   chan struct{} // a token after each change below
	ran     chan struct{} // a token after each synchronous inner returned
	mu      sync.Mutex
	next    Flux[R]         // the inner to run next, if pending
	nextCtx context.Context // and its context
	pending bool
	stop    context.CancelCauseFunc // the latest inner's, pending or running
	ended   bool                    // the upstream returned
}

// offer makes inner the next to run, cancelling the one running or pending.
func (s *switchBox[R]) offer(inner Flux[R]) {
	ctx, stop := context.WithCancelCause(s.ctx)
	s.mu.Lock()
	prev := s.stop
	s.next, s.nextCtx, s.pending, s.stop = inner, ctx, true, stop
	s.mu.Unlock()
	if prev != nil {
		prev(errSwitched)
	}
	signal(s.ready)
}

// upstreamEnded records the end of the upstream; its error ends the flow.
func (s *switchBox[R]) upstreamEnded(err error) {
	if err != nil {
		s.cancel(err)
	}
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	signal(s.ready)
}

// deliver runs the inners handed over, one at a time, until the upstream
// ended with none left, or the flow failed.
func (s *switchBox[R]) deliver(emit func(R) error, discard func(R, error)) error {
	var cur context.Context // the running inner's
	out := func(r R) error {
		if err := ctxDone(cur); err != nil {
			discard(r, err)
			return err
		}
		if err := emit(r); err != nil {
			s.cancel(err)
			return err
		}
		return nil
	}
	for {
		if err := ctxDone(s.ctx); err != nil {
			return err
		}
		s.mu.Lock()
		inner, pending, ended := s.next, s.pending, s.ended
		cur = s.nextCtx
		s.next, s.nextCtx, s.pending = Flux[R]{}, nil, false
		s.mu.Unlock()
		switch {
		case pending:
			if err := inner.run(cur, out); err != nil && context.Cause(cur) != errSwitched {
				s.cancel(err)
			}
			if inner.synchronous() {
				signal(s.ran) // the upstream waits for it
			}
			continue
		case ended:
			// An upstream error cancelled the crew before ended was set.
			return s.end(nil)
		}
		select {
		case <-s.ready:
		case <-s.ctx.Done():
		}
	}
}
