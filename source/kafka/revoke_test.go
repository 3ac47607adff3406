package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

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
