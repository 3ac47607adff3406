// Package jetstream scales aggflow out on NATS JetStream: several processes
// share the partitions of one stream, each handing the exchanges of the
// partitions it owns to one named aggregate's handler through a
// partition.Dispatcher, in order per aggregate, acknowledging only what is
// finished.
//
// # Topology
//
// A Topology is one stream whose N subjects <prefix>.0 ... <prefix>.<N-1>
// are the partitions. A producer publishes an exchange of aggregate id on
// the subject of Topology.PartitionOf(id) with id in the KeyHeader header
// (Topology.NewMsg does both), so an aggregate's exchanges are in one
// partition in publication order. Prepare checks that the stream's subjects
// are exactly these N (ErrSubjectsMismatch otherwise).
//
// # What is ordered, what is at least once
//
// An aggregate's exchanges are handled one at a time, in stream order,
// across crashes and handoffs; different aggregates run concurrently
// (partition.GroupKey groups them inside a partition). Delivery is at least
// once: each partition is read by a durable pull consumer with AckAll, and
// the consumer acknowledges only the partition's finished prefix (the
// message at the prefix, which acknowledges every one below it). On Start
// each durable consumer is reset to its ack floor + 1, so after a crash
// (kill -9 included) the partition is delivered again from the first
// position not acknowledged, in order: an aggregate sees an in-order replay
// of the exchanges that had run after that position, never a reordering.
// The replayed deliveries have Attempt of 2 or more (the server's count,
// which a reset restarts, raised to 2 for a position delivered before).
// Idempotency is the handler's: keep, with each aggregate's state, the
// Delivery.Position of the last exchange applied, and skip a delivery at or
// below it (see the example of NewConsumer).
//
// The server never redelivers by itself: AckWait is long (an hour by
// default) and MaxAckPending above the pending budget, since a redelivery by
// timeout or nak would come after newer exchanges of the same aggregate.
// Should one come anyway, the consumer stops with ErrRedelivered rather than
// break the order.
//
// # Assignment and revocation
//
// Assignment is static: each process is told the partitions it owns
// (NewConsumer's owned), and two processes must not own one partition at
// once. A graceful stop (dispatch.Component's StopGracefully, or Quiesce)
// revokes every owned partition: fetching stops, what was delivered drains
// until ForceStop, the rest is forced, the settled prefix is acknowledged
// and the server's confirmation awaited; then a new owner starts right after
// it, with no duplicate. Consumer.Revoke does the same for one partition
// while the others run. ForceStop loses the partitions: nothing more is
// acknowledged, and the next owner receives again, in order, what was not.
//
// # Bad input
//
// A message without KeyHeader (ErrMissingKey) or that the decoder refuses
// (ErrDecode) is never skipped silently: by default the consumer stops with
// the error, having acknowledged only what came before it in its partition;
// WithRejected lets the application park it (a dead-letter subject) and go
// on, its position then counting as finished. An unreachable server returns
// ErrUnreachable, a missing stream ErrStreamNotFound, from Connect and
// Prepare. A pull that fails while the consumer runs (the server shut down,
// the connection closed) fails the consumer: it stops gracefully with the
// error, acknowledging what it can, and the process restarts it (the
// partitions then replay in order from their ack floor).
//
// # Costs
//
// Per owned partition: two goroutines of the consumer (fetching and
// acknowledging) and two of the partition.Dispatcher, one pull request per
// fetch batch, one cumulative acknowledgement each time the prefix moves
// (measured: about one per 100 to 200 exchanges at full speed), and the
// messages delivered and not yet acknowledged, held for their
// acknowledgement (at most MaxAckPending). Throughput in one process is that
// of a plain jetstream loop with the same acknowledgements (docs/scale-out.md
// has the figures).
//
// # Servers
//
// Package jstest runs an in-process server for development, tests and
// examples. In production, Connect to the cluster's URLs (nats-server 2.15
// or later, for the consumer reset API), create the stream from
// Topology.StreamConfig with the replicas and limits the deployment needs,
// and start one consumer process per set of owned partitions.
package jetstream
