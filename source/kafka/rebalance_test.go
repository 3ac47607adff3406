package kafka_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// commitGate answers the cluster's commit requests that match: each with
// the error code answer gives it (0: answered as usual), n counting the
// matching requests from 1, and mark the count when the test began the
// stop (0 before).
type commitGate struct {
	seen, mark atomic.Int64
	first      chan struct{} // closed at the first matching request
}

func gateCommits(c *kafkatest.Cluster, match func(*kmsg.OffsetCommitRequest) bool, answer func(n, mark int64) int16) *commitGate {
	g := &commitGate{first: make(chan struct{})}
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if !match(r) {
			return nil, nil, false
		}
		n := g.seen.Add(1)
		if n == 1 {
			close(g.first)
		}
		code := answer(n, g.mark.Load())
		if code == 0 {
			return nil, nil, false
		}
		return refusal(r, code), nil, true
	})
	return g
}

// sinceStop returns the matching requests the cluster saw after the stop
// began.
func (g *commitGate) sinceStop() int64 { return g.seen.Load() - g.mark.Load() }

const finalKeys, finalPerKey, finalEnd = 30, 5, 30 * 5

// stopAfterTheEndWasRefused starts a consumer of a one-partition topic whose
// commits of the partition's end the gate answers, waits until every
// record was handled and the end's commit was refused at least once (so the
// end can only be committed by the stop), and begins the graceful stop.
func stopAfterTheEndWasRefused(t *testing.T, topic string, answer func(n, mark int64) int16,
	opts ...kafka.Option) (*kafkatest.Cluster, *kafka.Consumer[event], *commitGate) {
	t.Helper()
	c := startCluster(t, topic, 1)
	require.NoError(t, c.Produce(context.Background(), topic, records(finalKeys, finalPerKey)...))
	g := gateCommits(c, func(r *kmsg.OffsetCommitRequest) bool { return commits(r, finalEnd) }, answer)
	j := newJournal(finalEnd)
	k := newConsumer(t, c, topic, topic, newScheduler(t, 4), j.handle, opts...)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	select {
	case <-g.first:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the end was never committed")
	}
	g.mark.Store(g.seen.Load())
	k.Quiesce()
	require.Zero(t, j.check(t, finalKeys, finalPerKey))
	return c, k, g
}

func committed(t *testing.T, c *kafkatest.Cluster, topic string) int64 {
	t.Helper()
	got, err := c.Committed(context.Background(), topic, topic)
	require.NoError(t, err)
	return got[0]
}

// The stop's commit of the end, refused three times more, is tried again
// with backoff until the broker acknowledges it: the stop then succeeds
// with the end committed. (Tried once, as before, it left the partition to
// be read again while the stop reported success.)
func TestTheFinalCommitIsTriedAgainUntilAcknowledged(t *testing.T) {
	c, k, g := stopAfterTheEndWasRefused(t, "again", func(n, mark int64) int16 {
		if mark == 0 || n <= mark+3 {
			return kerr.RequestTimedOut.Code
		}
		return 0
	})
	stop(t, k)
	require.Equal(t, int64(finalEnd), committed(t, c, "again"), "the end is committed")
	require.GreaterOrEqual(t, g.sinceStop(), int64(4), "three refusals after the stop, then the acknowledgement")
	s := k.Stats()
	require.GreaterOrEqual(t, s.CommitFailures, int64(4))
	require.Zero(t, s.Uncommitted)
	require.NoError(t, k.Err())
}

// A final commit the broker keeps refusing is tried until the revoke's
// deadline, then the stop returns an error wrapping ErrCommit and the
// broker's reason, which is the consumer's Err too: a Runtime sees it.
func TestAFinalCommitStillRefusedAtTheDeadlineIsTheConsumersError(t *testing.T) {
	c, k, g := stopAfterTheEndWasRefused(t, "refused", func(int64, int64) int16 { return kerr.RequestTimedOut.Code },
		kafka.WithRevokeTimeout(400*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := k.StopGracefully(ctx)
	require.ErrorIs(t, err, kafka.ErrCommit)
	require.ErrorIs(t, err, kerr.RequestTimedOut)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the stop ended by itself, within the revoke timeout")
	require.ErrorContains(t, err, "partitions [0]")
	require.Same(t, k.Err(), err)
	require.GreaterOrEqual(t, g.sinceStop(), int64(2), "tried again before giving up")
	require.Less(t, committed(t, c, "refused"), int64(finalEnd))
	require.Zero(t, k.Stats().Uncommitted)
}

// When the group answers that this member's generation is over, the
// partition went (or is going) to another member, which may have committed
// already: the final commit is not pressed, the stop succeeds, and the
// partition is counted as left uncommitted.
func TestAFinalCommitRefusedBecauseTheGroupMovedOnIsCountedNotAnError(t *testing.T) {
	for _, code := range []int16{kerr.IllegalGeneration.Code, kerr.RebalanceInProgress.Code} {
		t.Run(kerr.ErrorForCode(code).(*kerr.Error).Message, func(t *testing.T) {
			c, k, g := stopAfterTheEndWasRefused(t, "moved", func(_, mark int64) int16 {
				if mark == 0 {
					return kerr.RequestTimedOut.Code
				}
				return code
			})
			stop(t, k)
			require.NoError(t, k.Err())
			require.Equal(t, int64(1), k.Stats().Uncommitted)
			require.Less(t, committed(t, c, "moved"), int64(finalEnd))
			// The final commit once, and at most one periodic commit that
			// was on its way when the stop began.
			require.LessOrEqual(t, g.sinceStop(), int64(2), "not tried again")
		})
	}
}

// A force during the final commit's retries takes over: nothing more is
// tried, the consumer ends at once, and the refused commit is not an error
// (a force commits nothing: the next owner reads the partition again).
func TestAForceEndsTheFinalCommitsRetries(t *testing.T) {
	retrying := make(chan struct{})
	_, k, _ := stopAfterTheEndWasRefused(t, "forced", func(n, mark int64) int16 {
		if mark > 0 && n == mark+2 {
			close(retrying)
		}
		return kerr.RequestTimedOut.Code
	}, kafka.WithRevokeTimeout(45*time.Second)) // with the commit timeout, within the rebalance timeout (60 s)
	select {
	case <-retrying:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the final commit was not tried again")
	}
	require.Equal(t, component.StateStopping, k.State())
	k.ForceStop()
	require.Equal(t, component.StateStopped, k.State())
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the force did not end the retries")
	}
	require.NoError(t, k.Err())
	require.Zero(t, k.Stats().Uncommitted)
}

// A partition revoked by a rebalance whose final commit fails for good
// stops the consumer by itself, with ErrCommit as its Err: it cannot
// commit what it handles.
func TestARevokedPartitionsFailedFinalCommitStopsTheConsumer(t *testing.T) {
	const keys, perKey = 40, 5
	c := startCluster(t, "revoked", 2, shortSessions)
	require.NoError(t, c.Produce(context.Background(), "revoked", records(keys, perKey)...))
	// Every commit is refused: the periodic ones too, so that the revoked
	// partition's end is left to its final commit.
	gateCommits(c, func(*kmsg.OffsetCommitRequest) bool { return true },
		func(int64, int64) int16 { return kerr.RequestTimedOut.Code })
	opts := []kafka.Option{kafka.WithClientOptions(memberClientOptions...),
		kafka.WithRevokeTimeout(300 * time.Millisecond)}
	sched := newScheduler(t, 8)
	j := newJournal(keys * perKey)
	a := newConsumer(t, c, "revoked", "revoked", sched, j.handle, opts...)
	startConsumer(t, a)
	j.wait(t, 20*time.Second)
	require.Len(t, a.Owned(), 2)

	b := newConsumer(t, c, "revoked", "revoked", sched, func(context.Context, partition.Delivery[event]) error { return nil }, opts...)
	startConsumer(t, b)
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the consumer whose final commit failed did not stop")
	}
	require.ErrorIs(t, a.Err(), kafka.ErrCommit)
	require.ErrorIs(t, a.Err(), kerr.RequestTimedOut)
	require.Positive(t, a.Stats().Revoked)
}

// A Runtime that stops the consumer returns the failed final commit.
func TestARuntimeReturnsTheFailedFinalCommit(t *testing.T) {
	c := startCluster(t, "unit", 1)
	require.NoError(t, c.Produce(context.Background(), "unit", records(finalKeys, finalPerKey)...))
	g := gateCommits(c, func(r *kmsg.OffsetCommitRequest) bool { return commits(r, finalEnd) },
		func(int64, int64) int16 { return kerr.RequestTimedOut.Code })
	j := newJournal(finalEnd)
	k := newConsumer(t, c, "unit", "unit", newScheduler(t, 4), j.handle, kafka.WithRevokeTimeout(300*time.Millisecond))
	rt, err := component.NewRuntime("unit", []component.Component{k})
	require.NoError(t, err)
	t.Cleanup(func() { rt.ForceStop(); <-rt.Done() })
	require.NoError(t, rt.Prepare(context.Background()))
	require.NoError(t, rt.Start())
	j.wait(t, 20*time.Second)
	select {
	case <-g.first:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the end was never committed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = rt.StopGracefully(ctx)
	require.ErrorIs(t, err, kafka.ErrCommit)
	require.NotErrorIs(t, err, dispatch.ErrShutdownTimeout)
	<-rt.Done() // Err is fixed at the Runtime's physical end
	require.ErrorIs(t, rt.Err(), kafka.ErrCommit)
}

// A member whose handlers hang: when a second member joins, the partitions
// taken from it drain until the revoke timeout, the rest is forced, and
// only the settled prefix is committed; the new owner handles everything
// from there, in order, and nothing is lost. Its graceful stop does the
// same for the partitions it kept.
func TestARevokedPartitionIsForcedAfterTheTimeoutAndCommittedBelow(t *testing.T) {
	const keys, perKey = 40, 10
	c := startCluster(t, "moves", 2, shortSessions)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "moves", records(keys, perKey)...))

	j := newJournal(keys * perKey)
	firstFive := newJournal(keys * 4)
	hanging := func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.Seq > 4 {
			<-ctx.Done() // hangs until forced
			return context.Cause(ctx)
		}
		j.add(d.Exchange)
		firstFive.add(d.Exchange)
		return nil
	}
	opts := []kafka.Option{kafka.WithClientOptions(memberClientOptions...),
		kafka.WithRevokeTimeout(200 * time.Millisecond)}
	sched := newScheduler(t, 2*64+4)
	a := newConsumer(t, c, "moves", "moves", sched, hanging, opts...)
	startConsumer(t, a)
	firstFive.wait(t, 20*time.Second)

	moved := newJournal(1)
	b := newConsumer(t, c, "moves", "moves", sched, func(ctx context.Context, d partition.Delivery[event]) error {
		moved.add(d.Exchange)
		return j.handle(ctx, d)
	}, opts...)
	startConsumer(t, b)
	moved.wait(t, 20*time.Second) // the rebalance gave the new member a partition
	require.Equal(t, int64(1), a.Stats().Revoked, "one partition revoked from the first member on the join")
	require.Len(t, a.Owned(), 1)
	stop(t, a) // what it kept is forced too, after the timeout
	j.wait(t, 20*time.Second)
	stop(t, b)

	require.Zero(t, j.check(t, keys, perKey), "nothing handled twice: the forced ones never finished")
	require.Equal(t, int64(2), a.Stats().Revoked, "and the other one on its stop")
	committed, err := c.Committed(ctx, "moves", "moves")
	require.NoError(t, err)
	require.Equal(t, int64(keys*perKey), committed[0]+committed[1])
}

// The group forgets the member (its heartbeat is answered UnknownMemberID):
// its partitions are lost, so their running handlers are cancelled and
// nothing more is committed for them; once it joined again it reads them
// from the last commit, the records read before flagged as redelivered,
// and every record ends handled once, in order.
func TestLostPartitionsAreForcedWithoutCommit(t *testing.T) {
	const keys, perKey = 40, 10
	c := startCluster(t, "lost", 2, shortSessions)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "lost", records(keys, perKey)...))

	var hang atomic.Bool
	hang.Store(true)
	cancelled := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	attempts := map[event]int{}
	j := newJournal(keys * perKey)
	firstFour := newJournal(keys * 4)
	k := newConsumer(t, c, "lost", "lost", newScheduler(t, 2*64+4), func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.Seq > 4 && hang.Load() {
			<-ctx.Done()
			once.Do(func() { hang.Store(false); close(cancelled) })
			return context.Cause(ctx)
		}
		mu.Lock()
		attempts[d.Exchange] = d.Attempt
		mu.Unlock()
		firstFour.add(d.Exchange)
		j.add(d.Exchange)
		return nil
	}, kafka.WithClientOptions(memberClientOptions...))
	startConsumer(t, k)
	firstFour.wait(t, 20*time.Second)

	c.Fake().ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the lost partitions' handlers were not cancelled")
	}
	j.wait(t, 20*time.Second)
	stop(t, k)

	require.Zero(t, j.check(t, keys, perKey))
	require.Equal(t, int64(2), k.Stats().Lost)
	mu.Lock()
	defer mu.Unlock()
	redelivered := 0
	for e, a := range attempts {
		if e.Seq <= 4 {
			require.Equal(t, 1, a, "%v: handled before the loss, once", e)
		} else if a == 2 {
			redelivered++
		}
	}
	require.Positive(t, redelivered, "records read before the loss are flagged as redelivered")
	committed, err := c.Committed(ctx, "lost", "lost")
	require.NoError(t, err)
	// The stop commits every partition's end, unless the group refused that
	// commit (a rebalance the short sessions of a loaded machine start at the
	// wrong moment): then the refusal is counted, and the next owner reads
	// the rest again, in order.
	if got := committed[0] + committed[1]; got != int64(keys*perKey) {
		require.Less(t, got, int64(keys*perKey))
		require.Positive(t, k.Stats().CommitFailures, "committed %d of %d without a refused commit", got, keys*perKey)
	}
}

// drainEnv sets the revoke timeout of TestKeptPartitionsFlowWhileARevokedOneDrains
// (a time.Duration; default 4 s): 10s measures the drain of the default.
const drainEnv = "AGGFLOW_KAFKA_REVOKE_DRAIN"

// keysOf returns, for each of partitions partitions, n+1 aggregate ids of
// distinct groups (partition.GroupKey over groups): the first is the
// partition's slow aggregate, which shares its group with none.
func keysOf(partitions int32, n, groups int) map[int32][]string {
	keys := make(map[int32][]string, partitions)
	for p := range partitions {
		used := map[int]bool{}
		for i := 0; len(keys[p]) < n+1; i++ {
			id := fmt.Sprintf("p%d-%d", p, i)
			if g := partition.GroupKey(id, groups); !used[g] {
				used[g] = true
				keys[p] = append(keys[p], id)
			}
		}
	}
	return keys
}

// produceTo writes the records to the partitions they name.
func produceTo(t *testing.T, c *kafkatest.Cluster, topic string, rs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

// distinct returns the records handled, each counted once.
func (j *journal) distinct() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, seqs := range j.seen {
		n += len(slices.Compact(slices.Sorted(slices.Values(seqs))))
	}
	return n
}

// handledAt records when a member handled each record, per partition.
type handledAt struct {
	mu sync.Mutex
	at map[int32][]time.Time
}

func (h *handledAt) add(p int32) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[int32][]time.Time{}
	}
	h.at[p] = append(h.at[p], now)
}

// first and last return the first and last times of partition p (zero
// when none).
func (h *handledAt) first(p int32) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.at[p]) == 0 {
		return time.Time{}
	}
	return slices.MinFunc(h.at[p], time.Time.Compare)
}

func (h *handledAt) last(p int32) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.at[p]) == 0 {
		return time.Time{}
	}
	return slices.MaxFunc(h.at[p], time.Time.Compare)
}

// rate returns the records of partitions ps handled in [from, to), per
// second.
func (h *handledAt) rate(ps []int32, from, to time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range ps {
		for _, t := range h.at[p] {
			if !t.Before(from) && t.Before(to) {
				n++
			}
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// A member owns 8 partitions under a steady backlog whose handlers take
// 20 ms, each partition starting with a record of an aggregate of its own
// that its handler holds (until forced, or let go). A second member joins:
// the partitions revoked from the first drain until the revoke timeout
// (their held record is forced), and meanwhile the kept partitions go on
// being fetched and handled at half their rate at least; the joining
// member gets the moved partitions once the drain ended, not a rebalance
// later, and begins none before the first member's last handler of it
// ended; order per aggregate holds, nothing is lost, nothing handled twice.
func TestKeptPartitionsFlowWhileARevokedOneDrains(t *testing.T) {
	const (
		partitions = 8
		perPart    = 4 // aggregates per partition beside the slow one
		perKey     = 1000
		groups     = 16
		work       = 20 * time.Millisecond
		before     = 2 * time.Second // the window measured before the join
	)
	drain := 4 * time.Second
	if v := os.Getenv(drainEnv); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, drainEnv)
		drain = d
	}
	c := startCluster(t, "flow", partitions, shortSessions)
	keys := keysOf(partitions, perPart, groups)
	var rs []*kgo.Record
	for p := range int32(partitions) {
		rs = append(rs, &kgo.Record{Partition: p, Key: []byte(keys[p][0]), Value: []byte("1")})
	}
	for seq := 1; seq <= perKey; seq++ {
		for p := range int32(partitions) {
			for _, k := range keys[p][1:] {
				rs = append(rs, &kgo.Record{Partition: p, Key: []byte(k), Value: []byte(strconv.Itoa(seq))})
			}
		}
	}
	produceTo(t, c, "flow", rs)

	j := newJournal(partitions * perPart * perKey)
	slow := newJournal(partitions) // the held records, handled once each
	isSlow := map[string]bool{}
	for _, ks := range keys {
		isSlow[ks[0]] = true
	}
	fast := make(chan struct{})  // closed: the handlers stop taking their time
	letGo := make(chan struct{}) // closed: a's kept partitions' held records end
	forced := make(chan time.Time, partitions)
	var aAt, bAt, aEnds, bStarts handledAt
	var bFirst atomic.Pointer[time.Time]
	member := func(at, starts, ends *handledAt, held bool, first *atomic.Pointer[time.Time]) func(context.Context, partition.Delivery[event]) error {
		return func(ctx context.Context, d partition.Delivery[event]) error {
			if first != nil {
				now := time.Now()
				first.CompareAndSwap(nil, &now)
			}
			if starts != nil {
				starts.add(d.Partition)
			}
			if ends != nil {
				defer ends.add(d.Partition)
			}
			if isSlow[d.Exchange.ID] {
				if held {
					select {
					case <-letGo:
					case <-ctx.Done(): // the revoke's force
						forced <- time.Now()
						return context.Cause(ctx)
					}
				}
				slow.add(d.Exchange)
				return nil
			}
			select {
			case <-fast:
			case <-time.After(work): // the handler's work
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			at.add(d.Partition)
			j.add(d.Exchange)
			return nil
		}
	}
	// Sessions of 6 s: a member stalled a second on a loaded machine is
	// not fenced (its partitions lost, their final commits not made).
	opts := []kafka.Option{kafka.WithClientOptions(kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond), kgo.RebalanceTimeout(30*time.Second)),
		kafka.WithRevokeTimeout(drain), kafka.WithGroups(groups),
		// A budget the handlers use up in a quarter of a second: the
		// partitions handle what the poll loop goes on fetching.
		kafka.WithMaxPending(partitions * 50), kafka.WithMaxPollRecords(100)}
	sched := newScheduler(t, 2*partitions*(perPart+1)+4)
	a := newConsumer(t, c, "flow", "flow", sched, member(&aAt, nil, &aEnds, true, nil), opts...)
	startConsumer(t, a)
	all := make([]int32, partitions)
	for p := range all {
		all[p] = int32(p)
	}
	require.Eventually(t, func() bool { return aAt.rate(all, time.Time{}, time.Now()) > 0 && len(a.Owned()) == partitions },
		20*time.Second, 5*time.Millisecond, "a handles its 8 partitions")
	started := time.Now()
	<-time.After(before + time.Second) // the window measured, after a second to settle

	joined := time.Now()
	b := newConsumer(t, c, "flow", "flow", sched, member(&bAt, &bStarts, nil, false, &bFirst), opts...)
	startConsumer(t, b)
	var end time.Time
	select {
	case end = <-forced:
	case <-time.After(drain + 20*time.Second):
		require.FailNow(t, "no held record of a revoked partition was forced")
	}
	require.Eventually(t, func() bool { return bFirst.Load() != nil }, 20*time.Second, 5*time.Millisecond, "b handles its partitions")
	kept := a.Owned()
	slices.Sort(kept)
	require.Len(t, kept, partitions/2, "the join moved half the partitions")
	require.Equal(t, int64(partitions/2), a.Stats().Revoked)
	begin := end.Add(-drain) // the revocation began a revoke timeout before its force
	rateBefore := aAt.rate(kept, joined.Add(-before), joined)
	rateDuring := aAt.rate(kept, begin, end)
	bGot := bFirst.Load().Sub(begin)
	t.Logf("kept partitions %v: %.0f records/s before the join, %.0f during the %v drain (%.0f%%); b handled its first record %v after the revocation began, %v after its join",
		kept, rateBefore, rateDuring, drain, 100*rateDuring/rateBefore, bGot.Round(time.Millisecond), bFirst.Load().Sub(joined).Round(time.Millisecond))
	require.Greater(t, rateBefore, 0.0, "measured from %v", started)
	require.GreaterOrEqual(t, rateDuring, rateBefore/2, "the kept partitions went on during the drain")
	// The drain, its final commit and one rebalance: the moved partitions
	// are not held for another revoke timeout.
	require.Less(t, bGot, drain+3*time.Second, "b got its partitions once the drain ended")

	// Exclusivity: every handler of a moved partition on a ended before
	// the first on b began.
	for p := range int32(partitions) {
		if !slices.Contains(kept, p) {
			require.Eventually(t, func() bool { return !bStarts.first(p).IsZero() }, 20*time.Second, 5*time.Millisecond, "b handles partition %d", p)
			last, first := aEnds.last(p), bStarts.first(p)
			require.True(t, last.Before(first), "partition %d: a's last handler ended %v after b's first began", p, last.Sub(first))
		}
	}

	close(fast)
	close(letGo)
	require.Eventually(t, func() bool { return j.distinct() == partitions*perPart*perKey && slow.distinct() == partitions },
		60*time.Second, 10*time.Millisecond, "every record handled")
	stop(t, a)
	stop(t, b)
	t.Logf("a: %+v", a.Stats())
	t.Logf("b: %+v", b.Stats())
	require.Zero(t, j.check(t, partitions*perPart, perKey), "nothing handled twice")
	require.Zero(t, slow.check(t, partitions, 1), "each held record handled once")
	require.Len(t, forced, partitions/2-1, "the held record of every revoked partition was forced")
}
