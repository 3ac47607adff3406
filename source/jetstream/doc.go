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
// which a reset restarts, raised to 2 for a position delivered before, by
// the server's state or, after a reset in the process, by what the process
// received). The one exception: a server that crashed (kill -9) may lose the
// latest delivered state of a file-stored durable consumer (written
// asynchronously); a consumer process that restarted too then replays the
// positions delivered after the state kept with Attempt 1.
//
// With WithFinishedMap (off by default) a crash replays only what had not
// finished: beside the ack floor, each partition's finished map
// (partition.FinishedMap: the positions finished above its prefix, and its
// prefix then) is kept in the KV bucket "<durable>-finished" (key "p.<n>",
// no TTL), written before the acknowledgement by a partition whose prefix
// did not move while the map changed (held below a slow exchange), at most
// every 25 ms (one KV write, never per message), and at every release. A
// partition opened skips what it records: tracked as finished and
// acknowledged, not delivered (Stats.Skipped). That never reorders an
// aggregate, whose finished positions above the prefix are a prefix of its
// positions there. A map of a durable consumer made again (another
// creation time) is ignored. What finished in the last 25 ms before a
// crash is replayed.
// Idempotency is the handler's: keep, with each aggregate's state, the
// Delivery.Position of the last exchange applied, and skip a delivery at or
// below it (see the example of NewConsumer).
//
// The server never redelivers by itself: AckWait is long (an hour by
// default) and MaxAckPending above the bound held (WithMaxHeld), since a redelivery by
// timeout or nak would come after newer exchanges of the same aggregate.
// One comes anyway when a delivery the server had queued for a pull request
// given up (another owner's, or one from before the reset) fails: the server
// queues the position again, though it was delivered since. The server
// numbers its deliveries from 1 at the reset; while they come without a gap,
// every delivery since the reset reached the partition, so a position at or
// below the last one is a redelivery of one received: it is dropped
// (counted in Stats.Duplicates).
//
// # Resets
//
// An acknowledgement is cumulative, so no acknowledgement may pass a
// position the partition did not handle (or settle through WithRejected).
// A break in continuity makes sure of it, in static and dynamic assignment
// alike: a consumer sequence that skips (a delivery went elsewhere, another
// client reset the consumer), a redelivery behind the last position, a pull
// that failed, a connection that broke (what was on its way is lost, though
// the server counts it delivered). The partition then resets: its tracker
// refuses positions from then on (partition.Tracker.Break), so the prefix
// stops below the hole; fetching stops; what was admitted drains (for at
// most the request timeout, then it is forced) and the settled prefix is
// acknowledged and confirmed; the connection is awaited; the durable
// consumer is reset to its ack floor + 1 and the partition assigned again
// from there (under the same lease, unpinned and pinned again, with a
// dynamic assignment): an in-order replay, counted in Stats.Resets and
// logged at WARN with the expected and the seen sequence. The consumer
// fails only when the server does not answer within WithServerLossTimeout
// (ErrUnreachable). Consumer.Revoke of a partition being reset returns
// ErrNotOwned.
//
// Pulls expire on the server (about 5 s after they are sent), which ends
// each with a status after everything it delivered; the client sets no
// deadline of its own that could drop a message already received (a
// process paused across the expiry would see both at once). nats.go still
// ends a pull itself when it stays silent for its expiry plus 1 s, dropping
// what it received meanwhile, and the server may still deliver to that pull
// afterwards; the next pull that the server ends comes after all of it, so
// that one is followed by a request for the server's count of deliveries,
// and a partition that received fewer resets (what a later delivery's
// skipped sequence would tell too, but only once there is one).
//
// # Assignment
//
// With a static assignment each process is told the partitions it owns
// (Subscription.Owned), and holds each under a lease, as a dynamic member
// does (below): a member name of its own (by default the consumer's name,
// the host's, the process id and a random suffix), a TTL of
// DefaultStaticLeaseTTL (WithStaticLease sets both and the wait). A second
// process given a partition another holds waits for its lease (a crashed
// owner's expires within the TTL, so a restarted process gets its partitions
// back), then fails with ErrOwned naming the partition and the holder; a
// static owner whose lease passed is fenced as a dynamic one is and, a
// static assignment not being handed around, fails with ErrLeaseLost. With
// WithDynamicAssignment the processes claim them. Either way, a lease per
// partition in a KV bucket (created if missing, with the lease TTL as the
// bucket's TTL), claimed by creating its key, renewed by updating it on the
// revision held every TTL/4, deleted on that revision once the partition was
// revoked gracefully; dynamic members also write a member key each,
// rewritten as often. A dynamic member aims at ceil(N/members) partitions:
// above that it hands the highest off (revoked gracefully, then its lease
// deleted), below it claims the lowest free ones; so a joining member takes
// its share with no duplicate, and a crashed one's partitions are claimed
// once its leases expired. The handlers' ctx carries the lease (LeaseOf):
// its member and its epoch, the claim's KV revision, which grows with every
// claim of the partition, for a handler that fences its writes on it.
//
// # The fence
//
// A stalled owner (stopped, paused by a long GC) must not go on once its
// lease passed. The owner keeps a local deadline: the monotonic time at
// which it sent its last confirmed write of the lease, plus the TTL, minus
// a margin of TTL/5. After it, it pulls nothing, hands nothing to a
// handler and acknowledges nothing, and it loses the partition
// (partition.Dispatcher.Lose). The server keeps the key for the TTL after
// it stored that write, so after the deadline, and another member creates
// the key only once it is gone. The claimer then unpins the partition's
// durable consumer (pinned-client priority policy), resets it to its ack
// floor + 1 and fetches: the old owner's next pull is refused
// (jetstream.ErrPinIDMismatch from the client), and a refused pull loses
// the partition too. What the fence cannot stop: a handler that had begun
// before the stall finishes after it (fence its side effect on the epoch),
// and an acknowledgement checked before the deadline may reach the server
// late; it only covers positions the old owner finished, so it loses
// nothing. docs/scale-out.md has the argument in full.
//
// # Revocation
//
// A graceful stop (component.Component's StopGracefully, or Quiesce)
// revokes every owned partition: fetching stops, what was delivered drains
// until ForceStop, the rest is forced, the settled prefix is acknowledged
// and the server's confirmation awaited; then a new owner starts right after
// it, with no duplicate. Consumer.Revoke does the same for one partition
// while the others run. ForceStop loses the partitions: nothing more is
// acknowledged, and the next owner receives again, in order, what was not.
//
// # Failures
//
// A message whose handler fails (an error or a panic) is never settled
// silently: WithFailurePolicy takes a partition.FailurePolicy. By default
// it is settled, acknowledged past with a WARN line naming the partition,
// the stream sequence, the aggregate, the attempt and the error (at most
// one line per partition a second, the next saying how many were folded)
// and counted in Stats.Failures. A policy may retry it in place with
// backoff (the message's group waits, the aggregates that share it
// included, and the partition's acknowledgements stay below it until it
// ends; a force cuts the wait short and the message is delivered again),
// then publish it to a dead-letter subject (acknowledged only once the
// PubAck came) or stop the consumer (acknowledged up to the message before
// it).
//
// # Bad input
//
// A message without KeyHeader (ErrMissingKey) or that the decoder refuses
// (ErrDecode) is never skipped silently: by default the consumer stops with
// the error, having acknowledged only what came before it in its partition;
// WithRejected lets the application park it (a dead-letter subject) and go
// on, its position then counting as finished. An unreachable server returns
// ErrUnreachable, a missing stream ErrStreamNotFound, from Connect and
// Prepare. A pull that fails while the consumer runs (the server restarted
// or shut down, the connection broke) resets its partition, which waits for
// the reconnect; the consumer fails with ErrUnreachable only when the server
// is not back within WithServerLossTimeout (default 1 minute).
//
// # Caught up
//
// Lag gives each owned partition's messages not finished, from the last
// delivery's NumPending and the messages held above the finished prefix;
// CaughtUp reads the stream's last sequence on each owned partition's
// subject and waits until the partitions have finished up to it: what a
// test or a batch job writes instead of an idle detector.
//
// # Costs
//
// Per owned partition: two goroutines of the consumer (fetching and
// acknowledging) and two of the partition.Dispatcher, one pull request per
// fetch batch, one cumulative acknowledgement each time the prefix moves
// (far fewer than one per exchange at full speed: docs/benchmarks.md), and the
// messages delivered and not yet acknowledged, held for their
// acknowledgement: at most the bound above the prefix (WithMaxHeld: each
// pull asks for no more than its room, and none is made while it is
// reached, so a stuck exchange stops its own partition's pulls, not the
// others', before the server's MaxAckPending would). Throughput in one process is that
// of a plain jetstream loop with the same acknowledgements (docs/scale-out.md
// has the figures).
//
// # Servers
//
// Package jstest runs an in-process server for development, tests and
// examples (nats-server 2.15.2). In production, Connect to the cluster's
// URLs: nats-server MinServerVersion (2.14.0, the consumer reset API) or
// later; Connect, NewConsumer and Prepare refuse an older one at once with
// ErrServerVersion, from the version its INFO gives, rather than let a
// request to an API it lacks time out as ErrUnreachable. Connect with
// nats.MaxReconnects(-1) (or enough to cover the server loss timeout) and a
// short nats.ReconnectWait (its default, 2 s, is time added to every server
// restart ridden out). Create the stream from Topology.StreamConfig with the
// replicas and limits the deployment needs, and start one consumer process
// per set of owned partitions (static), or any number of processes of one
// durable prefix, each a member of its own name (WithDynamicAssignment).
// Either needs the rights to the KV bucket "<durable>-leases" and to the
// consumer unpin API.
package jetstream
