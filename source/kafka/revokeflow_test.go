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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

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
