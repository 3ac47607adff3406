package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
)

// base is the origin of the monotonic times of the leases.
var base = time.Now()

// mono returns the monotonic time, in nanoseconds since base.
func mono() int64 { return int64(time.Since(base)) }

// The requests whose answers prove the membership (see sessionHook).
var (
	syncKey      = (&kmsg.SyncGroupRequest{}).Key()
	heartbeat848 = (&kmsg.ConsumerGroupHeartbeatRequest{}).Key() // KIP-848's, which assigns too
	proofKeys    = map[int16]bool{(&kmsg.JoinGroupRequest{}).Key(): true, syncKey: true,
		(&kmsg.HeartbeatRequest{}).Key(): true, heartbeat848: true}
)

// lease is a partition's assignment as its owner sees it. It is valid
// until deadline: the monotonic time at which the owner sent the last
// request that proved it a member of the group (a JoinGroup, SyncGroup or
// heartbeat the group answered, see sessionHook), plus the session
// timeout, minus a margin. The group keeps a member for a session timeout
// after it received its last heartbeat, which is after it was sent, so
// the membership outlives the local deadline by the margin at least;
// another member gets the partition only once it is gone. Once seen
// passed (or released), the lease is dead for good. A lease made again
// for a partition whose lease lapsed is valid only from the second proof
// sent after it was made: it has no deadline yet that a fencing answer
// would find passed, and franz-go sends a request after such an answer
// only once it lost the partitions, which kills the lease.
type lease struct {
	p       int32
	member  string
	epoch   uint64 // the group's generation at the assignment
	created int64  // the monotonic time from which proofs count

	mu       sync.Mutex    // serialises proofs
	needs    int           // proofs to ignore before the first that counts (mu)
	deadline atomic.Int64  // 0 until the first proof
	proven   chan struct{} // closed by the first proof
	alive    context.Context
	kill     context.CancelFunc
	once     sync.Once
	lapse    func(*lease) // called once, when the lease is seen passed
}

func newLease(p int32, member string, epoch uint64, created int64, needs int, lapse func(*lease)) *lease {
	l := &lease{p: p, member: member, epoch: epoch, created: created, needs: needs, proven: make(chan struct{}), lapse: lapse}
	l.alive, l.kill = context.WithCancel(context.Background())
	return l
}

// valid reports whether the owner may still hand records to the handler:
// a proof came, its deadline has not passed and the partition was not
// released. One atomic load and a clock read.
func (l *lease) valid() bool {
	if l.alive.Err() != nil {
		return false
	}
	d := l.deadline.Load()
	if d == 0 {
		return false // not proven yet
	}
	if mono() < d {
		return true
	}
	l.expire()
	return false
}

// expire kills the lease, seen passed, and reports it once.
func (l *lease) expire() {
	l.once.Do(func() {
		l.kill()
		if l.lapse != nil {
			l.lapse(l)
		}
	})
}

// prove moves the deadline to until, by a proof sent at sent, unless the
// proof is older than the lease or the lease is dead.
func (l *lease) prove(sent, until int64) {
	if sent < l.created {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.deadline.Load()
	switch {
	case l.alive.Err() != nil:
		return
	case l.needs > 0:
		l.needs--
		return
	case d != 0 && mono() >= d:
		l.expire()
		return
	case until > d:
		l.deadline.Store(until)
	}
	if d == 0 {
		close(l.proven)
	}
}

// Lease is a partition's assignment as its handler sees it, from LeaseOf:
// the member that holds it (Kafka's member id) and its epoch, the group's
// generation at the assignment, which grows with every rebalance of the
// group, so that a later owner of the partition holds a higher epoch. An
// idempotent handler can fence its writes on it: a store that refuses a
// write of an epoch below the highest it saw for the partition refuses a
// stalled old owner's. It is the counterpart of jetstream.Lease. The
// generation starts again only if the group is deleted.
type Lease struct {
	Partition int32
	Member    string
	Epoch     uint64
	l         *lease
}

// Valid reports whether the lease is still valid by the owner's clock: the
// partition was not revoked nor lost, and the group cannot have fenced the
// member yet (the send time of its last heartbeat, JoinGroup or SyncGroup
// the group answered, plus the session timeout less a fifth of it, has not
// passed). A handler that must not act
// once the lease passed checks it before its side effect; the epoch,
// checked by the store, is the stronger fence.
func (l Lease) Valid() bool { return l.l != nil && l.l.valid() }

type leaseCtxKey struct{}

// LeaseOf returns the lease under which a handler of a Consumer runs, from
// its ctx; false for a ctx that is not a handler's.
func LeaseOf(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseCtxKey{}).(*lease)
	if !ok {
		return Lease{}, false
	}
	return Lease{Partition: l.p, Member: l.member, Epoch: l.epoch, l: l}, true
}

// gate lets a record through to handler only while its partition's lease
// is valid. One whose lease is not proven yet waits for the proof; one
// whose lease passed is not handled: gate waits for the release that
// follows (the group's loss or revocation, or the consumer's own after the
// lapse), which forces it, and returns ErrLeaseLost, so its outcome is
// cancelled and its offset never committed.
func gate[T any](handler dispatch.Handler[partition.Delivery[T]]) dispatch.Handler[partition.Delivery[T]] {
	return func(ctx context.Context, d partition.Delivery[T]) error {
		l, ok := ctx.Value(leaseCtxKey{}).(*lease)
		if ok && !l.valid() {
			select {
			case <-l.proven:
			case <-l.alive.Done():
			case <-ctx.Done():
			}
			if !l.valid() {
				<-ctx.Done()
				return fmt.Errorf("%w: partition %d, epoch %d: %w", ErrLeaseLost, d.Partition, l.epoch, ctx.Err())
			}
		}
		return handler(ctx, d)
	}
}

// sessionHook is the client's hook that proves the membership: a request
// of the group (a JoinGroup, a SyncGroup or a heartbeat) sent at t and
// answered proves that the group held the member at t, so it extends the
// leases to t plus the session timeout minus the margin. The hook sees no
// error code, and need not: the group fences a member a session timeout
// after the last heartbeat it received, itself after the lease's last
// proof was sent, so an answer that says the member is gone arrives after
// the lease passed, and a lease seen passed is dead for good (prove); the
// loss franz-go reports next releases the partitions. (A member the group
// removes otherwise, at the rebalance timeout, is bounded by the revoke
// timeout, which must be under it.)
type sessionHook[T any] struct{ c *Consumer[T] }

// OnBrokerE2E proves the membership by an answered JoinGroup, SyncGroup or
// heartbeat.
func (h sessionHook[T]) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil || !proofKeys[key] {
		return
	}
	sent := mono() - int64(e2e.DurationE2E())
	if key == syncKey || key == heartbeat848 {
		h.c.synced.Store(sent) // an assignment's answer
	}
	h.c.prove(sent)
}

// prove extends the leases of the partitions owned, or still draining, by
// a proof sent at sent.
func (c *Consumer[T]) prove(sent int64) {
	c.mu.Lock()
	ls := make([]*lease, 0, len(c.leases))
	for l := range c.leases {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		l.prove(sent, sent+c.leaseFor)
	}
}

// lapsed is a lease's callback once seen passed: the partition is
// released as lost and assigned again by the poll loop (renew), unless the
// group takes it first.
func (c *Consumer[T]) lapsed(l *lease) {
	c.stats.lapsed.Add(1)
	c.cfg.logger.Warn("kafka: lease lapsed: the group may have fenced this member; the partition's records wait for the group's answer",
		slog.String("consumer", c.name), slog.Int("partition", int(l.p)), slog.Uint64("epoch", l.epoch),
		slog.String("member", l.member))
	c.mu.Lock()
	c.lapses[l.p] = l
	wake := c.wakePoll
	c.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// renew releases the partitions whose lease lapsed and the group did not
// take, as lost (forced, nothing committed), and assigns them again from
// their last commit, the client's fetch position moved back to it, under
// new leases valid from the second proof sent after: if the group did not
// fence the member, their records above the commit run again (in order,
// Attempt 2); if it did, the loss that follows releases them before that.
// Called by the poll loop between batches; c.rebal keeps a rebalance
// callback from taking a partition between its release and its assignment
// here.
func (c *Consumer[T]) renew() {
	c.mu.Lock()
	none := len(c.lapses) == 0
	c.mu.Unlock()
	if none {
		return
	}
	c.rebal.Lock()
	defer c.rebal.Unlock()
	c.mu.Lock()
	from := map[int32]int64{}
	meta := map[int32]kadm.OffsetResponse{}
	for p, l := range c.lapses {
		if o := c.owned[p]; o != nil && o.lease == l && !c.closing {
			from[p] = max(o.committed, o.from)
			if o.committed >= 0 { // the map acknowledged with it, carried over
				meta[p] = kadm.OffsetResponse{Offset: kadm.Offset{At: o.committed, Metadata: o.meta}}
			}
		}
	}
	clear(c.lapses)
	c.mu.Unlock()
	if len(from) == 0 {
		return
	}
	ps := make([]int32, 0, len(from))
	at := make(map[int32]kgo.EpochOffset, len(from))
	for p, off := range from {
		ps = append(ps, p)
		at[p] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	c.settle(c.take(ps), false)
	c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{c.sub.Topic: at})
	now := mono()
	for p, off := range from {
		c.assign(p, off, now, false, meta[p])
	}
}
