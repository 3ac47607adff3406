package flux

// NewMulticastSink returns a sink that gives each item to every subscriber
// present when it is emitted.
//
// A subscriber that joins others starts at the next item emitted. The sink
// is warm: with nobody subscribed it keeps up to
// capacity items (then TryEmitNext refuses with EmitFailZeroSubscriber and
// EmitNext waits), and the next subscriber to arrive alone starts with them;
// so does one that arrives after everybody left, with the items the last of
// them had not taken. A subscriber arriving after the terminal signal gets
// what is kept for it, then the signal.
//
// Backpressure is by the slowest subscriber: once one lags by capacity
// items, TryEmitNext refuses with EmitFailOverflow and EmitNext waits for
// it, unless WithDropOldest drops that subscriber's oldest item instead. A
// subscriber that leaves takes nothing with it: the sink stays open, and
// what it had not taken stays for the others.
// capacity < 1 gives an error wrapping ErrInvalidArgument. Memory: capacity
// slots of T, allocated here, whatever the number of subscribers.
func NewMulticastSink[T any](capacity int, opts ...SinkOption) (*ManySink[T], error) {
	return newManySink[T](multicastKind, capacity, 0, opts)
}
