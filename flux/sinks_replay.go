package flux

// NewReplaySink returns a multicast sink that also replays: a subscriber
// starts with the last limit items emitted (fewer if fewer were emitted),
// then gets the live ones, then the terminal signal, even if it subscribes
// after the sink terminated.
//
// The sink is bounded: a subscriber may lag by at most capacity
// items (capacity >= limit, since a new subscriber starts limit items back),
// after which TryEmitNext refuses with EmitFailOverflow and EmitNext waits
// (or WithDropOldest drops that subscriber's oldest item). With nobody
// subscribed nothing is ever refused: the window moves on, and an item that
// leaves it without anyone subscribed was owed to nobody. limit < 1 or
// capacity < limit gives an error wrapping ErrInvalidArgument. Memory:
// capacity slots of T, allocated here.
func NewReplaySink[T any](limit, capacity int, opts ...SinkOption) (*ManySink[T], error) {
	return newManySink[T](replayKind, capacity, limit, opts)
}
