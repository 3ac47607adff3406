// Package kafka binds aggflow to Kafka consumer groups with franz-go
// (github.com/twmb/franz-go/pkg/kgo): a Consumer is one group member whose
// records go to one named aggregate's handler, each aggregate's records in
// offset order, different aggregates concurrently, and whose commits never
// pass a record that has not finished. It is its own module, so that users
// of the core download no Kafka client.
//
// # Assignment
//
// The key of a record is its aggregate's id; the producer partitions by it
// (Kafka's default partitioner, murmur2 of the key), so one aggregate lives in one
// partition. Each partition the group assigns becomes an intake of a
// partition.Dispatcher starting at the group's committed offset: its own
// lanes, grouped by partition.GroupKey(Codec.ID(x), groups), all on the one
// scheduler the Consumer borrows. One poll loop delivers every partition's
// records in offset order, to the partitions owned when its poll returned:
// a revoked partition takes no record once its revocation began, and an
// assignment ends the poll in progress and waits for it, so that a new
// owner gets no record fetched before it.
//
// # Commit
//
// Handlers of one partition finish out of order, so only the finished
// prefix of each partition is committed, as prefix + 1 (the next offset to
// read), never with franz-go's per-record marks, which would cover records
// still running in other groups. Autocommit is off. One goroutine commits,
// synchronously: an offset counts as committed only when the broker
// acknowledged it, and the next commit starts after that answer; a refused
// commit is tried again on the next progress.
//
// Each commit's metadata carries the map of the records finished above its
// offset (partition.FinishedMap, at most WithFinishedMapLen bytes, 4000 by
// default: below the broker's offset.metadata.max.bytes, 4096 by default),
// sent in franz-go's own request, so the group's fencing (generation,
// member id) refuses a zombie's map with its offset. The map is committed
// again whenever it changed, the offset stuck or not: at most one commit in
// flight, each costing O(records held above the prefix) to encode. On
// assignment the member reads the committed metadata (one OffsetFetch) and
// skips the records it records finished: tracked as finished, not
// delivered, counted in Stats.Skipped. So a crash with a slow record early
// in a partition replays that record, what had not finished, and what
// finished after the last commit; not the partition above it. Metadata that
// is no map (another writer's, franz-go's member id, an older commit) or
// another offset's replays from the commit, as before.
//
// # Revoked and lost
//
// A revoked partition stops taking records, drains until the revoke timeout
// (WithRevokeTimeout, default 10 s), forces what is left, and its settled
// prefix is committed before the rebalance goes on; a forced record never
// finished, so the prefix stops below it and the next owner reads it again.
// The drain runs in franz-go's revoke callback, so the next owner is
// assigned only after the final commit; the Consumer does not set
// kgo.BlockRebalanceOnPoll, which would stop every poll while the callback
// runs, so the kept partitions go on being fetched and handled meanwhile.
// Prepare refuses a revoke timeout plus commit timeout above the group's
// rebalance timeout (kgo.RebalanceTimeout, default 60 s): the group would
// remove the member mid-drain.
// That final commit is tried again with backoff until the revoke's deadline;
// still refused, it is the Consumer's Err (ErrCommit), unless the group
// answered that it moved on (a rebalance took the partition: counted in
// Stats.Uncommitted, the next owner reads it again). A lost partition (the
// group fenced this member) is forced at once and not committed. A graceful stop revokes every partition that way and leaves the
// group; ForceStop forces them. What ran above the last commit before a
// crash and is not in its map runs again on the next owner, after what came before it: duplicates
// are in-order replays (Delivery.Attempt is 2 for a record this process had
// delivered before), and idempotency is the handler's, by aggregate version.
//
// # Fence
//
// Each assigned partition has a lease (LeaseOf, from the handler's ctx):
// the member id and an epoch, the group's generation at the assignment,
// which a later owner's exceeds, so a store that refuses a write of an
// epoch below the highest it saw for the partition refuses a fenced
// member's. The lease is valid until the partition is released, and no
// longer than the send time of the member's last heartbeat (or JoinGroup,
// SyncGroup) the group answered plus the session timeout less a fifth:
// the group cannot have fenced the member before. A record whose lease
// passed is not handled (a member that stalled past its session and wakes
// up handles nothing more): its outcome is cancelled, never committed, and
// the partition is forced, then assigned again from its last commit unless
// the group took it meanwhile. Commits the group refuses as a zombie's
// count in Stats.StaleCommits. Prepare refuses a heartbeat interval of 2/5
// of the session timeout or more.
//
// # Pause
//
// Two rules pause a partition (kgo's PauseFetchPartitions, that partition
// only), each resumed at half its limit. WithMaxHeld bounds what a
// partition holds above its committed offset, every record finished or not
// and their bytes (partition.WithMaxHeld, per partition), so a stuck record keeps at most the bound plus one polled
// batch after it. WithMaxPending is the budget of the whole Consumer, its
// unfinished records only: a partition whose pending records reach its
// share (the budget over the partitions owned) is paused too, so the poll
// loop never waits on a slow partition while the others have room. A
// partition's pending records stay under min(share, bound) plus one polled
// batch, its held ones under the bound plus one polled batch.
//
// Size the budget by time, not records: a revoked partition drains its
// share within WithRevokeTimeout only if share × handler time / goroutines
// fits in it, and a graceful stop drains the whole budget the same way. So
// budget ≈ goroutines × revoke timeout / handler time, halved for a margin:
// with 2 goroutines, 1 ms handlers and the 10 s revoke timeout, 10,000
// records, where the default 64 Ki takes 33 s and the revoke is forced.
//
// # Sessions and failover
//
// A member killed without leaving the group (kill -9, a crash, a lost host)
// keeps its partitions until the group's session timeout passes since its
// last heartbeat: franz-go's default kgo.SessionTimeout is 45 s (and
// kgo.HeartbeatInterval 3 s), so its partitions stand still for about 50 s
// before another member reads them. Set both through WithClientOptions to
// what a failover may cost: kgo.SessionTimeout(6*time.Second) and
// kgo.HeartbeatInterval(600*time.Millisecond) make it about 7 s; 6 s is the
// lowest a broker allows by default (group.min.session.timeout.ms, kfake's
// too), and Prepare refuses a heartbeat of 2/5 of the session or more. A
// shorter session fences a member sooner after a pause (GC, SIGSTOP), so
// keep it above the longest stall a healthy member may have.
//
// # Caught up
//
// Lag gives each owned partition's records not finished, from the high
// watermark the fetches report; CaughtUp reads the end offsets once and
// waits until the owned partitions have finished the records below them:
// what a test or a batch job writes instead of an idle detector.
//
// # Failures
//
// A record whose handler fails (an error or a panic) is never settled
// silently: WithFailurePolicy takes a partition.FailurePolicy. By default
// it is settled, committed past with a WARN line naming the partition, the
// offset, the aggregate, the attempt and the error (at most one line per
// partition a second, the next saying how many were folded) and counted in
// Stats.Failures. A policy may retry it in place with backoff (the
// record's group waits, the aggregates that share it included, and the
// partition's commits stay below it until it ends; a force cuts the wait
// short and the record is read again by the next owner), then produce it
// to a dead-letter topic (committed past only once the broker acknowledged
// it) or stop the consumer (committed up to the record before it).
//
// # Bad input
//
// Unreachable brokers and a missing topic fail Prepare (ErrUnreachable,
// ErrNoTopic). A setting the broker refuses for good (a session timeout
// outside its group.min/max.session.timeout.ms, an authorization, the
// group's max size) stops the consumer with Err wrapping ErrRefused, the
// setting and the broker's error; transient errors are retried. A record without a key (ErrNoKey) or that Codec.Decode
// refuses (ErrDecode) goes to the bad-record hook: by default it is logged
// with the reason and discarded, its offset committed past; a hook that
// returns an error stops the Consumer, which commits up to the record
// before it.
//
// # Tests and a real cluster
//
// Package kafkatest runs franz-go's kfake in the process for tests and
// examples. The module's tests include one against a real cluster, skipped
// unless AGGFLOW_KAFKA_BROKERS names its seed brokers (host:port, comma
// separated); in production give the Subscription the cluster's seed
// brokers, and TLS or SASL through WithClientOptions.
package kafka
