package flux

import (
	"context"
	"strconv"
	"sync"
)

// EmitResult says what became of one emission into a ManySink. Every Emit
// call returns one, so that no item or signal is ever dropped silently: an
// item the sink refused is still the caller's.
type EmitResult uint8

const (
	// EmitOK: accepted. An item is queued for every current subscriber (or,
	// with none, buffered for the next one, or kept in the replay window);
	// it reaches each of them in emission order, after the items emitted
	// before it. A terminal signal is recorded and reaches every subscriber
	// after the items queued for it.
	EmitOK EmitResult = iota
	// EmitFailTerminated: the sink already completed or failed.
	EmitFailTerminated
	// EmitFailOverflow: a subscriber lags by the sink's capacity and the
	// sink waits for the slowest one (TryEmitNext only: EmitNext waits).
	EmitFailOverflow
	// EmitFailCancelled: the sink was cancelled by its consumer: the
	// subscriber of a unicast sink left before the terminal signal.
	EmitFailCancelled
	// EmitFailZeroSubscriber: nobody is subscribed and the buffer kept for
	// the next subscriber is full (TryEmitNext only: EmitNext waits).
	EmitFailZeroSubscriber
	// EmitFailContext: the ctx given to EmitNext ended before there was
	// room; context.Cause(ctx) says why.
	EmitFailContext
)

var emitResultNames = [...]string{"ok", "terminated", "overflow", "cancelled", "zero subscriber", "context done"}

// String returns "ok", "terminated", "overflow", "cancelled", "zero
// subscriber", "context done" or "EmitResult(n)".
func (r EmitResult) String() string {
	if int(r) < len(emitResultNames) {
		return emitResultNames[r]
	}
	return "EmitResult(" + strconv.Itoa(int(r)) + ")"
}

// IsSuccess reports whether r is EmitOK.
func (r EmitResult) IsSuccess() bool { return r == EmitOK }

// SinkOption configures a ManySink.
type SinkOption func(*sinkOptions)

type sinkOptions struct{ dropOldest bool }

// WithDropOldest makes a full sink drop instead of refusing or waiting:
// before an item is emitted, each subscriber that lags by the capacity
// skips its oldest queued item, which goes to that subscriber's discard
// hook with reason ErrSinkOverflow; the other subscribers lose nothing.
// With nobody
// subscribed there is no hook to give an item to, so a full buffer still
// refuses (EmitFailZeroSubscriber).
func WithDropOldest() SinkOption { return func(o *sinkOptions) { o.dropOldest = true } }

type sinkKind uint8

const (
	unicastKind sinkKind = iota
	multicastKind
	replayKind
)

var sinkNames = [...]string{"UnicastSink", "MulticastSink", "ReplaySink"}

// ManySink is a hot source that many goroutines push items into and whose
// AsFlux is subscribed by one (unicast) or many (multicast, replay)
// subscribers. It is named ManySink because Sink is already the push side
// that Create hands its function, which exists only
// within one subscription. Make one with NewUnicastSink, NewMulticastSink
// or NewReplaySink.
//
// # Buffer and backpressure
//
// The items sit once in a ring of capacity slots shared by all subscribers,
// each of which reads at its own position: a subscriber may lag behind the
// newest item by at most capacity items, plus the one it is delivering.
// Emitting into a full sink (a subscriber lags by capacity) refuses with
// EmitFailOverflow (TryEmitNext), waits for the slowest subscriber
// (EmitNext), or drops that subscriber's oldest item (WithDropOldest). A
// waiting EmitNext is woken once the slowest subscriber lags by at most half
// the capacity, so that emitter and subscribers hand over in batches;
// TryEmitNext takes any free slot.
// An item that every subscriber has taken, and that the replay window does
// not keep, frees its slot at once.
//
// # Delivery
//
// Each subscriber's items are delivered on the goroutine that subscribed,
// serially and in emission order, followed by the terminal signal once it
// has taken every item queued for it; the sink starts no goroutine. A
// subscriber leaves when its ctx ends (Subscribe returns the cause) or its
// downstream returns an error. An error signal does not cut ahead of the
// queued items.
//
// # Concurrency and costs
//
// All methods are safe for concurrent use; emissions are serialized, so
// every subscriber sees the same order. No lock is held while anyone waits:
// an EmitNext waiting for room and an idle subscriber park on channels.
// Emitting costs O(subscribers) (the idle ones are woken) and no
// allocation, but for one channel each time EmitNext finds the sink full
// (about 0.004 per item at capacity 256 with the emitter ahead); a
// subscriber costs two allocations to attach and one lock round trip per
// item.
type ManySink[T any] struct {
	kind  sinkKind
	size  uint64 // ring slots: the capacity
	limit uint64 // replay window; 0 for the other kinds
	drop  bool   // WithDropOldest

	mu        sync.Mutex
	ring      []T
	head      uint64 // lowest index still held; indexes grow without wrapping
	tail      uint64 // index of the next item
	subs      []*sinkSub[T]
	low       uint64 // the slowest subscriber's next index, while there are subscribers
	atLow     int    // subscribers whose next index is low
	claimed   bool   // unicast: subscribed once
	done      bool   // terminated: err is the signal (nil: completion)
	err       error
	cancelled bool          // its consumer left: nothing more can be delivered
	room      chan struct{} // closed when room may have appeared; nil while no emitter waits
}

func newManySink[T any](kind sinkKind, capacity, limit int, opts []SinkOption) (*ManySink[T], error) {
	op := "New" + sinkNames[kind]
	switch {
	case capacity < 1:
		return nil, invalid(op, "capacity below 1")
	case kind == replayKind && limit < 1:
		return nil, invalid(op, "limit below 1")
	case capacity < limit:
		return nil, invalid(op, "capacity below limit")
	}
	var o sinkOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &ManySink[T]{
		kind:  kind,
		size:  uint64(capacity),
		limit: uint64(limit),
		drop:  o.dropOldest,
		ring:  make([]T, capacity),
	}, nil
}

// TryEmitNext offers v without waiting: EmitOK, or the reason it was
// refused (EmitFailOverflow, EmitFailZeroSubscriber, EmitFailTerminated,
// EmitFailCancelled). Under WithDropOldest it calls the discard hooks of the
// subscribers it drops an item for, after releasing the sink.
func (s *ManySink[T]) TryEmitNext(v T) EmitResult {
	s.mu.Lock()
	r, drops := s.offerLocked(v)
	s.mu.Unlock()
	discardOverflow(drops)
	return r
}

// EmitNext emits v, waiting while the sink is full until ctx ends: EmitOK,
// EmitFailTerminated, EmitFailCancelled, or EmitFailContext (ctx ended
// first, or was done on entry; v was not emitted). A full sink wakes its
// waiting emitters once the slowest subscriber lags by at most half the
// capacity (it took items, or the slowest left), when a subscriber arrives,
// and when the sink terminates or is cancelled; they are not served in
// arrival order. An emitter called from the onNext of the slowest
// subscriber waits until ctx ends.
func (s *ManySink[T]) EmitNext(ctx context.Context, v T) EmitResult {
	for {
		if ctx.Err() != nil {
			return EmitFailContext
		}
		s.mu.Lock()
		r, drops := s.offerLocked(v)
		if r != EmitFailOverflow && r != EmitFailZeroSubscriber {
			s.mu.Unlock()
			discardOverflow(drops)
			return r
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return EmitFailContext
		}
	}
}

// TryEmitComplete completes the sink: each subscriber, present or future,
// gets the items queued for it and then completion. EmitOK, or
// EmitFailTerminated / EmitFailCancelled.
func (s *ManySink[T]) TryEmitComplete() EmitResult { return s.terminate(nil) }

// TryEmitError fails the sink with err, delivered like completion, after
// the queued items. A nil err fails it with an error wrapping
// ErrInvalidArgument, as Error(nil) does. EmitOK, or EmitFailTerminated /
// EmitFailCancelled.
func (s *ManySink[T]) TryEmitError(err error) EmitResult {
	if err == nil {
		err = invalid(sinkNames[s.kind]+".TryEmitError", "nil error")
	}
	return s.terminate(err)
}

// CurrentSubscriberCount returns the number of subscribers attached now.
func (s *ManySink[T]) CurrentSubscriberCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// AsFlux returns the Flux view of the sink: each Subscribe attaches one
// subscriber (see the constructor for where it starts reading) and returns
// after the terminal signal, or when ctx ends or the downstream fails.
func (s *ManySink[T]) AsFlux() Flux[T] { return Flux[T]{subscribe: s.subscribe} }

// offerLocked appends v unless the sink is terminated, cancelled or full.
// Under WithDropOldest a full sink first makes room (drops, for the hooks).
func (s *ManySink[T]) offerLocked(v T) (EmitResult, []sinkDrop[T]) {
	switch {
	case s.done:
		return EmitFailTerminated, nil
	case s.cancelled:
		return EmitFailCancelled, nil
	}
	if s.kind == replayKind {
		s.releaseLocked(s.tail + 1) // the window moves on
	}
	var drops []sinkDrop[T]
	if s.tail-s.head == s.size {
		switch {
		case len(s.subs) == 0:
			return EmitFailZeroSubscriber, nil
		case !s.drop:
			return EmitFailOverflow, nil
		}
		drops = s.dropHeadLocked()
	}
	s.ring[s.tail%s.size] = v
	s.tail++
	s.wakeSubsLocked()
	return EmitOK, drops
}

// dropHeadLocked frees the oldest slot of a full sink under WithDropOldest:
// every subscriber that still has to take it skips it. In a full sink with
// subscribers the slowest are at head (the replay window, no wider than the
// ring, has moved on), so this frees a slot.
func (s *ManySink[T]) dropHeadLocked() []sinkDrop[T] {
	v := s.ring[s.head%s.size]
	drops := make([]sinkDrop[T], 0, s.atLow)
	for _, sub := range s.subs {
		if sub.next == s.head {
			sub.next++
			drops = append(drops, sinkDrop[T]{v: v, discard: sub.discard})
		}
	}
	s.movedLocked(s.tail + 1)
	return drops
}

func (s *ManySink[T]) terminate(err error) EmitResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done:
		return EmitFailTerminated
	case s.cancelled:
		return EmitFailCancelled
	}
	s.done, s.err = true, err
	s.wakeSubsLocked()
	s.wakeRoomLocked()
	return EmitOK
}

// wakeSubsLocked wakes the subscribers waiting for an item or a signal.
func (s *ManySink[T]) wakeSubsLocked() {
	for _, sub := range s.subs {
		if sub.idle {
			sub.idle = false
			signal(sub.wake)
		}
	}
}

// wakeRoomLocked wakes every EmitNext waiting for room; each tries again.
func (s *ManySink[T]) wakeRoomLocked() {
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}
