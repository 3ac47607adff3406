package flux

import (
	"context"
	"fmt"
	"slices"

	"github.com/aggflow/aggflow/component"
)

// errUnicastSubscribed is the error of a second Subscribe to a unicast sink.
var errUnicastSubscribed = fmt.Errorf("flux: UnicastSink: second subscription: %w", ErrUnicastSink)

// sinkSub is one subscriber of a ManySink; its fields are guarded by the
// sink's mutex.
type sinkSub[T any] struct {
	next    uint64        // index of the next item to take
	idle    bool          // waits on wake for an item or a signal
	wake    chan struct{} // one slot
	discard func(T, error)
}

// sinkDrop is an item dropped for one subscriber under WithDropOldest.
type sinkDrop[T any] struct {
	v       T
	discard func(T, error)
}

func discardOverflow[T any](drops []sinkDrop[T]) {
	for _, d := range drops {
		d.discard(d.v, ErrSinkOverflow)
	}
}

// subscribe is the Flux of AsFlux: attach, deliver, detach. A unicast
// subscriber that leaves early cancels the sink.
func (s *ManySink[T]) subscribe(ctx context.Context, emit func(T) error) (err error) {
	sub, err := s.attach(ctx)
	if err != nil {
		return err
	}
	// Detached on every exit, a runtime.Goexit of the downstream included
	// (with the Goexit's error then): a subscriber left attached would hold
	// the sink's emitters for ever.
	err = component.Call(func() error { return s.drain(ctx, sub, emit) }, func(p *component.PanicError) {
		s.detach(sub, exitedAs(sinkNames[s.kind], p), s.kind == unicastKind)
	})
	s.detach(sub, err, s.kind == unicastKind)
	return err
}

// attach adds a subscriber reading from startLocked. It wakes waiting
// emitters: under WithDropOldest one refused for want of a subscriber can
// now drop instead.
func (s *ManySink[T]) attach(ctx context.Context) (*sinkSub[T], error) {
	sub := &sinkSub[T]{wake: make(chan struct{}, 1), discard: discarder[T](ctx)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == unicastKind {
		if s.claimed {
			return nil, errUnicastSubscribed
		}
		s.claimed = true
	}
	sub.next = s.startLocked()
	switch {
	case len(s.subs) == 0 || sub.next < s.low: // a replay subscriber may start behind the others
		s.low, s.atLow = sub.next, 1
	case sub.next == s.low:
		s.atLow++
	}
	s.subs = append(s.subs, sub)
	s.wakeRoomLocked()
	return sub, nil
}

// startLocked is where a new subscriber starts reading: a unicast one, and
// a multicast one that finds nobody subscribed, at the oldest item held (the
// buffer kept for it); a multicast one that joins others at the next item;
// a replay one at most limit items back.
func (s *ManySink[T]) startLocked() uint64 {
	switch {
	case s.kind == replayKind:
		return max(s.head, s.tail-min(s.tail, s.limit))
	case s.kind == multicastKind && len(s.subs) > 0:
		return s.tail
	}
	return s.head
}

// drain delivers the subscriber's items to emit on the calling goroutine
// until the terminal signal (its value), ctx's end (its cause) or emit's
// error. The item being delivered has already left the ring.
func (s *ManySink[T]) drain(ctx context.Context, sub *sinkSub[T], emit func(T) error) error {
	for {
		if err := ctxDone(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		if sub.next < s.tail {
			v := s.takeLocked(sub)
			s.mu.Unlock()
			if err := emit(v); err != nil {
				return err
			}
			continue
		}
		if s.done {
			err := s.err
			s.mu.Unlock()
			return err
		}
		sub.idle = true
		s.mu.Unlock()
		select {
		case <-sub.wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// takeLocked returns the subscriber's next item and moves it on; when the
// last of the slowest subscribers moves, the slowest position moves.
func (s *ManySink[T]) takeLocked(sub *sinkSub[T]) T {
	v := s.ring[sub.next%s.size]
	at := sub.next == s.low
	sub.next++
	if at {
		s.atLow--
		if s.atLow == 0 {
			s.movedLocked(s.tail)
		}
	}
	return v
}

// detach removes the subscriber, which ended with reason. cancel (a unicast
// subscriber, the last subscriber of a Share connection): if it left before
// taking everything up to the terminal signal, the sink is cancelled and the
// items it had not taken go to its discard hook, outside the lock.
func (s *ManySink[T]) detach(sub *sinkSub[T], reason error, cancel bool) {
	s.mu.Lock()
	i := slices.Index(s.subs, sub)
	s.subs = slices.Delete(s.subs, i, i+1)
	if sub.next == s.low {
		s.atLow--
	}
	var dropped []T
	switch {
	case cancel && !(s.done && sub.next == s.tail):
		dropped = s.cancelLocked(sub.next)
	case s.atLow == 0:
		s.movedLocked(s.tail)
	}
	s.mu.Unlock()
	for _, v := range dropped {
		sub.discard(v, reason)
	}
}

// cancelLocked empties the ring, returning the items from index from on,
// and refuses every later emission (EmitFailCancelled, unless terminated).
func (s *ManySink[T]) cancelLocked(from uint64) []T {
	var dropped []T
	if s.tail > from {
		dropped = make([]T, 0, s.tail-from)
	}
	var zero T
	for i := s.head; i < s.tail; i++ {
		if i >= from {
			dropped = append(dropped, s.ring[i%s.size])
		}
		s.ring[i%s.size] = zero
	}
	s.head, s.cancelled = s.tail, true
	s.wakeRoomLocked()
	return dropped
}

// movedLocked finds the slowest position again after the last subscriber
// at it moved on or left, releases what nobody needs any more (end as in
// releaseLocked), and wakes the waiting emitters once the slowest
// subscriber lags by at most half the capacity: emitter and subscribers
// then hand over in batches, not one slot at a time, which costs a third of
// the time per item when the sink runs full. Costs O(subscribers), once per
// move of the slowest position.
func (s *ManySink[T]) movedLocked(end uint64) {
	s.low, s.atLow = s.tail, 0
	for _, sub := range s.subs {
		switch {
		case sub.next < s.low:
			s.low, s.atLow = sub.next, 1
		case sub.next == s.low:
			s.atLow++
		}
	}
	s.releaseLocked(end)
	if s.tail-s.low <= s.size/2 {
		s.wakeRoomLocked()
	}
}

// releaseLocked frees the slots below the lowest index that must stay: the
// slowest subscriber's next item, and for a replay sink the oldest of the
// window ending at end (the next tail when making room for an emission);
// with no subscriber a unicast or multicast sink keeps all it holds.
func (s *ManySink[T]) releaseLocked(end uint64) {
	f := s.head
	switch {
	case len(s.subs) > 0:
		f = s.low
	case s.kind == replayKind:
		f = end
	}
	if s.kind == replayKind {
		f = min(f, end-min(end, s.limit))
	}
	var zero T
	for ; s.head < f; s.head++ {
		s.ring[s.head%s.size] = zero // no reference kept to a released item
	}
}
