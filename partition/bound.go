package partition

import "math"

// Defaults of the bound above the prefix (WithMaxHeld), per partition.
const (
	// DefaultMaxHeldRecords is the most positions a partition holds above
	// its finished prefix, finished or not. About 48 bytes each in the
	// tracker, plus what the binding keeps of each record (a Kafka
	// *kgo.Record, a JetStream message: a few hundred bytes with their
	// payload), so about 5 MB per partition with small records.
	DefaultMaxHeldRecords = 16 * 1024
	// DefaultMaxHeldBytes is the most bytes of records (as the binding
	// sizes them: Kafka key and value, JetStream data) a partition holds
	// above its finished prefix: 16 MiB, 128 MiB for 8 partitions.
	DefaultMaxHeldBytes = 16 << 20
)

// SetBound bounds what the tracker holds above the finished prefix: records
// positions, finished or not, and bytes (as given to TrackSize; 0: records
// only). records < 1 removes the bound. The tracker never refuses a
// position for it: the binding asks Room before it fetches more and stops
// fetching the partition while it is 0; the bound is reached once either
// limit is, and stays reached until both fell to half (the low-water mark),
// when Freed signals. Call it before the first Track (an Assign does).
func (t *Tracker) SetBound(records int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maxRecords, t.maxBytes = max(records, 0), max(bytes, 0)
	if t.freed == nil {
		t.freed = make(chan struct{}, 1)
	}
	t.full = t.maxRecords > 0 && (t.tail-t.head >= uint64(t.maxRecords) || t.maxBytes > 0 && t.bytes >= t.maxBytes)
	t.fell()
}

// Held returns what the tracker holds above the finished prefix: every
// position tracked and not yet passed by the prefix, finished or not (a
// blocked prefix holds all those tracked after it), and their bytes as
// given to TrackSize. O(1).
func (t *Tracker) Held() (records int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.tail - t.head), t.bytes
}

// Room returns how many more positions the partition may fetch under its
// bound (SetBound): 0 from the moment the bound is reached until what is
// held fell to the low-water mark; the records left under the limit
// otherwise (math.MaxInt without a bound). A binding asks for at most that
// many (JetStream's pull) or pauses the partition at 0 (Kafka's
// PauseFetchPartitions); a batch fetched already may pass the bound by its
// size. O(1).
func (t *Tracker) Room() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.maxRecords == 0:
		return math.MaxInt
	case t.full:
		return 0
	}
	return t.maxRecords - int(t.tail-t.head)
}

// Freed receives (at most one pending signal) each time a reached bound
// fell to its low-water mark: Room is above 0 again. Nil without a bound.
func (t *Tracker) Freed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.freed
}

// fell clears a reached bound at the low-water mark and signals Freed.
// Under t.mu.
func (t *Tracker) fell() {
	if !t.full || t.tail-t.head > uint64(t.maxRecords/2) || t.maxBytes > 0 && t.bytes > t.maxBytes/2 {
		return
	}
	t.full = false
	select {
	case t.freed <- struct{}{}:
	default:
	}
}
