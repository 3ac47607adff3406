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
// The upstream runs on a goroutine of the subscription and never waits for
// the inners; fn runs there. The inners run
// one after another on the subscribing goroutine, which delivers their
// items. An inner replaced by a newer item before its turn came is never
// subscribed. Costs one
// goroutine per subscription, and per upstream item a context, a
// mutex-guarded hand-over and, when the subscribing goroutine waits for
// it, a wake-up. fn nil gives ErrInvalidArgument.
func SwitchMap[T, R any](f Flux[T], fn func(T) Flux[R]) Flux[R] {
	if fn == nil {
		return Error[R](invalid("SwitchMap", "nil function"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) (err error) {
		s := &switchBox[R]{crew: newCrew(ctx), ready: make(chan struct{}, 1)}
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
			return nil
		}, s.upstreamEnded)
		return s.deliver(emit, discarder[R](ctx))
	}}
}

// switchBox hands the latest inner of a SwitchMap subscription from the
// upstream's goroutine to the subscribing one.
type switchBox[R any] struct {
	*crew
	ready   chan struct{} // a token after each change below
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
