package flux

import (
	"context"
	"sync"
	"time"

	"github.com/aggflow/aggflow/component"
)

// Sample emits, at the end of each period d, the latest item that arrived
// within it, if any; at completion the item not yet sampled, then the
// completion. An item replaced by a later one within the same period is
// given to the discard hook (DoOnDiscard) with ErrSkipped, and the one held
// when the flow fails or is cancelled with the reason.
//
// The periods are a time.Ticker waited on by one goroutine of the
// subscription, which also delivers the samples; it is joined before
// Sample returns. The upstream runs on the subscribing goroutine and takes
// turns with it through a one-slot channel, so the samples reach the
// downstream one at a time and an item arriving while a sample is
// delivered waits for that delivery. d <= 0 gives ErrInvalidArgument.
func (f Flux[T]) Sample(d time.Duration) Flux[T] {
	if d <= 0 {
		return Error[T](invalid("Sample", "period not positive"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		uctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		s := &sampler[T]{aside: newAside[T]("Sample", uctx, stop, emit)}
		quit := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		component.Go(func() error { s.tick(d, quit); return nil }, func(error) { wg.Done() })
		// On every exit, a runtime.Goexit in the upstream included.
		stopTicking := sync.OnceFunc(func() {
			close(quit)
			wg.Wait()
		})
		defer stopTicking()
		uerr := f.run(uctx, s.next)
		s.lock.hold() // a sample being delivered finishes first
		s.closed = true
		s.lock.give()
		stopTicking()
		v, ok := s.take()
		var rest []T
		if ok {
			rest = []T{v}
		}
		return s.end(uerr, rest, func() error { return emit(v) })
	}}
}

// sampler is the state of one Sample subscription, guarded by lock.
type sampler[T any] struct {
	aside[T, T]
	latest T
	has    bool
	closed bool // the upstream returned: the subscribing goroutine has the held item
}

func (s *sampler[T]) next(v T) error {
	if err := s.enter(v); err != nil {
		return err
	}
	old, had := s.latest, s.has
	s.latest, s.has = v, true
	s.lock.give()
	if had {
		s.discard(old, ErrSkipped)
	}
	return nil
}

// take removes the held item. Under lock.
func (s *sampler[T]) take() (T, bool) {
	v, ok := s.latest, s.has
	var zero T
	s.latest, s.has = zero, false
	return v, ok
}

// tick delivers a sample at each period until quit is closed.
func (s *sampler[T]) tick(d time.Duration, quit <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		if s.lock.take(s.uctx) != nil {
			return // ending: the subscribing goroutine handles the held item
		}
		s.sample()
	}
}

// sample delivers the held item, if any, and gives the lock back.
func (s *sampler[T]) sample() {
	defer s.lock.give()
	if s.closed || s.err != nil || s.uctx.Err() != nil {
		return
	}
	if v, ok := s.take(); ok {
		s.deliver(v)
	}
}
