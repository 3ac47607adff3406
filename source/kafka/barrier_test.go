package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// describe returns the group's members and the partitions of topic the
// group assigned them, as the broker describes them.
func describe(t *testing.T, c *kafkatest.Cluster, group, topic string) (members int, assigned map[int32]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ds, err := kadm.NewClient(cl).DescribeGroups(ctxTimeout(t, 10*time.Second), group)
	require.NoError(t, err)
	g := ds[group]
	assigned = map[int32]bool{}
	for p := range g.AssignedPartitions()[topic] {
		assigned[p] = true
	}
	return len(g.Members), assigned
}

// holdPoll is a client hook that, once armed, holds the poll that returns
// the next record (on the polling goroutine, before the poll returns)
// until let go.
type holdPoll struct {
	armed  atomic.Bool
	held   chan struct{} // closed once a poll is held
	letGo  chan struct{}
	closed sync.Once
}

func (h *holdPoll) OnFetchRecordUnbuffered(_ *kgo.Record, polled bool) {
	if polled && h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.letGo
	}
}

func (h *holdPoll) release() { h.closed.Do(func() { close(h.letGo) }) }

// A poll returns a batch of the one partition, and before the poll loop
// sees it the partition is revoked (an eager balancer revokes everything
// when a member joins) and assigned back to the member, from its final
// commit: the batch is of the old assignment and must not go to the new
// one, which reads the same records from the commit. Every record is
// handled once, in order, and the consumer does not fail.
func TestABatchPolledBeforeARevokeNeverGoesToTheNextAssignment(t *testing.T) {
	const keys, perKey = 20, 50
	c := startCluster(t, "held", 1, shortSessions)
	require.NoError(t, c.Produce(context.Background(), "held", records(keys, perKey)...))
	hook := &holdPoll{held: make(chan struct{}), letGo: make(chan struct{})}
	t.Cleanup(hook.release)
	j := newJournal(keys * perKey)
	var handled atomic.Int64
	eager := kgo.Balancers(kgo.RoundRobinBalancer())
	opts := []kafka.Option{kafka.WithRevokeTimeout(2 * time.Second), kafka.WithMaxPollRecords(20),
		kafka.WithMaxPending(20)}
	sched := newScheduler(t, 8)
	a := newConsumer(t, c, "held", "held", sched, func(ctx context.Context, d partition.Delivery[event]) error {
		handled.Add(1)
		return j.handle(ctx, d)
	}, append(opts, kafka.WithClientOptions(append(memberClientOptions, eager, kgo.WithHooks(hook))...))...)
	startConsumer(t, a)
	require.Eventually(t, func() bool { return handled.Load() >= 100 }, 20*time.Second, time.Millisecond, "a handles some")
	hook.armed.Store(true)
	select {
	case <-hook.held:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no poll held")
	}

	// b joins: a's partition is revoked, then assigned to a or to b; b
	// leaves: it is a's again.
	b := newConsumer(t, c, "held", "held", sched, j.handle, append(opts, kafka.WithClientOptions(append(memberClientOptions, eager)...))...)
	startConsumer(t, b)
	require.Eventually(t, func() bool { return a.Stats().Revoked >= 1 }, 20*time.Second, time.Millisecond, "a's partition revoked")
	require.Eventually(t, func() bool {
		members, assigned := describe(t, c, "held", "held")
		return members == 2 && len(assigned) == 1
	}, 20*time.Second, 10*time.Millisecond, "the group assigned the partition again")
	bOwned := len(b.Owned()) == 1
	stop(t, b)
	// The assignment back to a waits for the held poll to return: a
	// consumer that would let the old batch go to the new assignment has
	// made it within a second.
	early := false
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(time.Second); !early; {
		select {
		case <-tick.C:
			early = len(a.Owned()) == 1
			continue
		case <-deadline:
		}
		break
	}
	hook.release()
	select {
	case <-j.all:
	case <-a.Done():
		require.FailNow(t, "a stopped", "%v (assigned again while a poll was held: %v)", a.Err(), early)
	case <-time.After(30 * time.Second):
		require.FailNow(t, "timed out", "assigned again while a poll was held: %v", early)
	}
	require.Eventually(t, func() bool { return len(a.Owned()) == 1 }, 20*time.Second, time.Millisecond, "a owns the partition again")
	stop(t, a)
	t.Logf("b was given the partition: %v; a assigned it again while a poll was held: %v; a: %+v", bOwned, early, a.Stats())
	require.NoError(t, a.Err())
	require.Zero(t, j.check(t, keys, perKey), "nothing handled twice")
}
