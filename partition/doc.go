// Package partition is the broker-neutral core of scale-out: what a binding to
// a partitioned broker (JetStream, Kafka) needs to hand records to the
// dispatchers of package dispatch and to acknowledge them without breaking
// the order of an aggregate's exchanges across a crash or a rebalance.
//
// # Deliveries
//
// A broker delivers each partition in order, each record at a position that
// increases within the partition, with gaps: a Kafka offset, a JetStream
// stream sequence. A Delivery carries the exchange with its partition, its
// position and its attempt (1 on the first delivery). A binding hands
// records to a partition's Intake one at a time (Deliver, DeliverSize) or a
// fetched run at once (DeliverBatch: one hand-off per group touched per run
// of up to 256).
//
// # What is acknowledged: the finished prefix only
//
// Inside one partition the exchanges go to many groups that run concurrently,
// so they finish out of order: position 12 may finish before 10. Only the
// finished prefix of a partition may be acknowledged (JetStream) or committed
// (Kafka, as prefix + 1, the next offset to read): the highest position p such
// that every position delivered up to p has finished. A Tracker keeps it, one
// per partition (a Set holds them by partition): Track each position in
// delivery order, Finish it when its exchange was handled, read Prefix to
// acknowledge.
//
// Acknowledging a position above an unfinished one would lose the unfinished
// one in a crash, or get it redelivered after exchanges of the same aggregate
// that came later. Holding to the prefix keeps the promise simple: after a
// crash or a revocation the broker delivers again everything after the
// prefix, in order. The cost is duplicates: what had finished or was running
// above the prefix runs again, after the exchanges before it, in order, so an
// aggregate sees an in-order replay of its last exchanges, never a reordering.
// Idempotency is the handler's, by aggregate version.
//
// # The invariant: no acknowledgement passes a position not handled
//
// An acknowledgement (a commit) is cumulative: it covers every position of
// the partition below it, tracked or not. So the prefix must never pass a
// position the broker delivered and the binding did not handle or settle
// deliberately (a rejected record parked by its hook). Positions are not
// dense, so the Tracker cannot see a record that never reached it: the
// binding can (a JetStream consumer sequence that skips, a redelivery behind
// the last position, a pull that failed with records in it), and calls
// Tracker.Break. From then on Track refuses (ErrBroken) until a Reset, so the
// prefix stays at or below the last position tracked before the break; the
// binding drains what it admitted, acknowledges that prefix, and has the
// broker deliver again from it (Reset to the prefix + 1).
//
// # Ended but not acknowledgeable
//
// A dispatcher ends every exchange exactly once: handled (success, error,
// panic) or discarded (a forced stop dropped it). Its outcome hook plugs into
// the tracker of the delivery's partition:
//
//	handled                          -> tracker.Finish(d.Position)
//	discarded, or cancelled by force -> tracker.Discard(d.Position)
//
// where cancelled by force is an error, or a panic, of a handler that ends
// once Revoke or Lose forced.
//
// A handler's failure (an error or a panic) is what the FailurePolicy
// says (WithFailurePolicy). By default it is settled: its position
// finishes, so one poison record never stops its partition, and a WARN
// line (rate-limited per partition) and FailureStats.Settled make it
// visible. A policy may retry it in place with backoff (its group waits,
// with the aggregates that share it), then dead-letter it (finished once
// the broker confirmed the dead letter) or stop the consumer (not
// finished). A discarded position, and one whose handler a force cancelled
// midway (a backoff wait included), never counts as finished: the prefix
// stops below it for good, Blocked reports it, and the broker delivers it
// again, in order, to the partition's next owner or after a Reset. So a
// forced stop never acknowledges what it did not handle.
//
// # The finished map: a crash replays only what had not finished
//
// Only the prefix is acknowledged, so a crash replays everything above it,
// even what finished: one slow record early in a partition costs the whole
// partition above it. A FinishedMap records the finished positions above the
// acknowledged prefix (Tracker.FinishedAbove, as spans), encoded compact and
// bounded in length (FinishedMap.Encode, DecodeFinishedMap); the bindings
// store it beside the acknowledgement (Kafka: in the commit's metadata;
// JetStream: in a KV bucket, opt-in), and a partition's next owner
// tracks the positions it holds as finished without delivering them. This
// never reorders an aggregate: its exchanges are handled one at a time in
// position order, so its finished positions above the prefix are a prefix of
// its own positions there, and what is replayed of it comes after what is
// skipped. A map too long for its bound keeps its first spans: it never
// claims a position that did not finish, and the rest is replayed.
//
// # Group keys inside a partition
//
// A broker partitions by a hash of the key: Kafka's murmur2, or the producer's
// choice, often aggregate.GroupKey(id, P). Every id of partition p then has
// hash mod P == p, and grouping it again by the same hash mod groups would use
// only groups/P of the groups when P divides groups (8 of 64 for 8
// partitions), leaving most of the dispatcher's lanes idle. GroupKey hashes
// with FNV-1a and a finaliser, independent of both, so the ids of one
// partition spread over all the groups.
//
// # Costs and concurrency
//
// Track plus Finish costs O(1) time per position whatever the gaps, takes one
// short mutex each (no foreign code under it) and allocates nothing in the
// steady state: a Tracker's ring and index double when full and are reused.
// Memory is about 48 bytes per position held above the prefix. Every method
// of Tracker and Set is safe for concurrent use: one goroutine tracks a
// partition, any number finish its positions.
//
// # The bound above the prefix
//
// One unfinished position holds every position tracked after it, finished
// or not, until it finishes. WithMaxHeld bounds that per partition, in
// records and bytes (as the binding sizes them at Intake.DeliverSize or in
// a Record): once either limit is reached, Intake.Room is 0 and the
// binding fetches nothing more of that partition (Kafka pauses it,
// JetStream makes no pull) until both fell to half, which Intake.Freed
// signals; the other partitions go on. The pending budget
// (WithMaxPending) counts the unfinished only, a part of what is held:
// pending <= min(budget, held), held <= bound + one fetched batch.
package partition
