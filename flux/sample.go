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
	return periodic(f, "Sample", d, func() bin[T, T] { return new(latestBin[T]) })
}

// BufferDuration emits the items in slices, one per period d from the
// subscription on: at the end of each period, the items that arrived
// within it, unless there were none; at completion the partial slice, if
// any, then the completion. Each slice is new and owned by the receiver.
// On an error or cancellation the partial slice goes to the discard hook
// (DoOnDiscard) with the reason.
//
// The periods are a time.Ticker waited on by one goroutine of the
// subscription, which also delivers the slices, as Sample does: the
// upstream, on the subscribing goroutine, waits while a slice is
// delivered. d <= 0 gives ErrInvalidArgument.
func BufferDuration[T any](f Flux[T], d time.Duration) Flux[[]T] {
	if d <= 0 {
		return Error[[]T](invalid("BufferDuration", "duration not positive"))
	}
	return periodic(f, "BufferDuration", d, func() bin[T, []T] { return new(sliceBin[T]) })
}

// bin is what a periodic operator holds of the current period: add takes
// an item, returning the one it replaced (Sample's), and take empties it,
// giving what to emit and the items that make it.
type bin[T, R any] interface {
	add(v T) (old T, replaced bool)
	take() (r R, items []T, ok bool)
}

// latestBin is Sample's bin: the last item.
type latestBin[T any] struct {
	v   T
	has bool
}

func (l *latestBin[T]) add(v T) (T, bool) {
	old, had := l.v, l.has
	l.v, l.has = v, true
	return old, had
}

func (l *latestBin[T]) take() (T, []T, bool) {
	v, ok := l.v, l.has
	var zero T
	l.v, l.has = zero, false
	if !ok {
		return v, nil, false
	}
	return v, []T{v}, true
}

// sliceBin is BufferDuration's bin: every item, in order.
type sliceBin[T any] struct{ buf []T }

func (s *sliceBin[T]) add(v T) (old T, replaced bool) {
	s.buf = append(s.buf, v)
	return old, false
}

func (s *sliceBin[T]) take() ([]T, []T, bool) {
	out := s.buf
	s.buf = nil
	return out, out, len(out) > 0
}

// periodic runs f into a bin made by newBin, which a ticker of period d
// empties downstream.
func periodic[T, R any](f Flux[T], op string, d time.Duration, newBin func() bin[T, R]) Flux[R] {
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		uctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		s := &sampler[T, R]{aside: newAside[T](op, uctx, stop, emit), bin: newBin()}
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
		r, rest, _ := s.bin.take()
		return s.end(uerr, rest, func() error { return emit(r) })
	}}
}

// sampler is the state of one Sample or BufferDuration subscription,
// guarded by lock.
type sampler[T, R any] struct {
	aside[T, R]
	bin    bin[T, R]
	closed bool // the upstream returned: the subscribing goroutine has the bin
}

func (s *sampler[T, R]) next(v T) error {
	if err := s.enter(v); err != nil {
		return err
	}
	old, replaced := s.bin.add(v)
	s.lock.give()
	if replaced {
		s.discard(old, ErrSkipped)
	}
	return nil
}

// tick delivers a sample at each period until quit is closed.
func (s *sampler[T, R]) tick(d time.Duration, quit <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		if s.lock.take(s.uctx) != nil {
			return // ending: the subscribing goroutine handles the bin
		}
		s.sample()
	}
}

// sample delivers what the bin holds, if anything, and gives the lock back.
func (s *sampler[T, R]) sample() {
	defer s.lock.give()
	if s.closed || s.err != nil || s.uctx.Err() != nil {
		return
	}
	if r, _, ok := s.bin.take(); ok {
		s.deliver(r)
	}
}
