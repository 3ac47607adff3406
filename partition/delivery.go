package partition

// Delivery is one record as a partitioned broker delivers it: the exchange,
// the partition it was read from and its position there. Positions increase
// within a partition, with gaps (a JetStream stream sequence seen through a
// filtered consumer, a Kafka offset next to transaction markers or compacted
// records); they say nothing across partitions.
//
// A Delivery is a small value (the exchange plus 32 bytes); copy it freely.
// It carries, unexported, its place in its partition's tracker, which the
// outcome finds it by: compare Deliveries by their fields, not with ==, as
// one built by hand has none.
// It is the exchange type of a dispatcher fed by a broker binding, so that
// the outcome of an exchange carries what the binding acknowledges.
type Delivery[T any] struct {
	// Exchange is the decoded message, addressed to one aggregate.
	Exchange T
	// Partition is the broker's partition number: a Kafka partition, or the
	// partition a JetStream subject mapping assigned.
	Partition int32
	// Position is the record's place in its partition: a Kafka offset, a
	// JetStream stream sequence.
	Position int64
	// Attempt is 1 on the first delivery and counts redeliveries from there:
	// JetStream's NumDelivered; for Kafka, which keeps no such count, the
	// binding's own count of re-reads after a reset.
	Attempt int

	// seq is the position's place in its intake's tracker (0: none), so
	// that its outcome ends it without a look-up by position.
	seq uint64
}

// Redelivered reports whether the broker delivered this record before
// (Attempt > 1): its handler may have run, in full or in part, already.
func (d Delivery[T]) Redelivered() bool { return d.Attempt > 1 }
