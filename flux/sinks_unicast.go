package flux

// NewUnicastSink returns a sink for exactly one subscriber, with a bounded
// queue of capacity items.
//
// Items emitted before the subscriber arrives are buffered, up to capacity;
// then TryEmitNext refuses with EmitFailZeroSubscriber and EmitNext waits.
// Once it is subscribed, a full buffer refuses with EmitFailOverflow (or
// drops the oldest item under WithDropOldest). The subscriber gets every
// buffered item, then the live ones, then the terminal signal, even if it
// arrives after the sink terminated.
//
// A second Subscribe, concurrent or later, fails with an error wrapping
// ErrUnicastSink. If the subscriber leaves before the terminal signal (its
// ctx ended, its downstream failed), the sink is cancelled: the items it had
// not taken go to its discard hook with its reason, and every later emission
// returns EmitFailCancelled. capacity < 1 gives an error wrapping
// ErrInvalidArgument. Memory: capacity slots of T, allocated here.
func NewUnicastSink[T any](capacity int, opts ...SinkOption) (*ManySink[T], error) {
	return newManySink[T](unicastKind, capacity, 0, opts)
}
