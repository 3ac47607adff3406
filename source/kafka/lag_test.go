package kafka_test

import (
	"context"
	"errors"
	"fmt"
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

// endOffsets asks the cluster for the topic's high watermarks, with a
// client of its own.
func endOffsets(t *testing.T, c *kafkatest.Cluster, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, listed.Error())
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}

// CaughtUp returns only once every record published before the call was
// handled, those the failure policy settled included, twice in a row with
// records published in between; Lag is zero everywhere then.
func TestCaughtUpReturnsOnceThePublishedRecordsAreHandled(t *testing.T) {
	const keys, perKey, partitions = 50, 40, 4
	c := startCluster(t, "orders", partitions)
	ctx := context.Background()
	var handled atomic.Int64
	gate := make(chan struct{})
	h := func(ctx context.Context, d partition.Delivery[event]) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		handled.Add(1)
		if d.Exchange.Seq%10 == 0 {
			return errors.New("refused") // settled by the default failure policy: it counts as finished
		}
		return nil
	}
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), h)
	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))
	startConsumer(t, k)

	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := k.CaughtUp(cctx)
		done <- err
		if err == nil {
			done <- fmt.Errorf("%d handled", handled.Load())
		}
	}()
	close(gate)
	require.NoError(t, <-done)
	require.EqualError(t, <-done, fmt.Sprintf("%d handled", keys*perKey), "handled when CaughtUp returned")

	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, k.CaughtUp(cctx))
	require.Equal(t, int64(2*keys*perKey), handled.Load(), "handled when the second CaughtUp returned")
	lag := k.Lag()
	require.Len(t, lag, partitions, "a lag per owned partition")
	for p, n := range lag {
		require.Zero(t, n, "partition %d", p)
	}
	require.Equal(t, int64(2*keys*perKey/10), k.Stats().Failures.Settled, "settled records, of both rounds")
	stop(t, k)
}

// With one record held by its handler, CaughtUp does not return before its
// ctx ends, and its error names the held record's partition and how far
// behind it is; Lag says the same.
func TestCaughtUpNamesThePartitionBehindAStuckRecord(t *testing.T) {
	const keys, perKey, partitions = 20, 10, 4
	c := startCluster(t, "orders", partitions)
	ctx := context.Background()
	release := make(chan struct{})
	stuck := make(chan partition.Delivery[event], 1)
	h := func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.ID == "acct-0" && d.Exchange.Seq == 1 {
			stuck <- d
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), h)
	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))
	startConsumer(t, k)
	d := <-stuck
	// acct-0's first record is the first produced: the first of its
	// partition, so nothing of the partition finishes before it.
	require.Zero(t, d.Position)
	ends := endOffsets(t, c, "orders")
	require.Positive(t, ends[d.Partition])

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := k.CaughtUp(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), fmt.Sprintf("partition %d: %d behind", d.Partition, ends[d.Partition]))
	require.Equal(t, ends[d.Partition], k.Lag()[d.Partition], "lag of the held record's partition")

	close(release)
	cctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, k.CaughtUp(cctx))
	stop(t, k)
}

// CaughtUp refuses before Start, and one waiting behind a held record
// when the consumer stops returns ErrIllegalState, not nil: the stop
// released every partition, which does not make the member caught up.
func TestCaughtUpRefusesAConsumerNotRunning(t *testing.T) {
	c := startCluster(t, "orders", 2)
	ctx := context.Background()
	stuck := make(chan struct{})
	h := func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.ID == "acct-0" && d.Exchange.Seq == 1 {
			close(stuck)
			<-ctx.Done() // until the force
		}
		return nil
	}
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), h)
	require.ErrorIs(t, k.CaughtUp(ctx), kafka.ErrIllegalState, "before Start")
	require.NoError(t, c.Produce(ctx, "orders", records(4, 2)...))
	startConsumer(t, k)
	<-stuck
	done := make(chan error, 1)
	go func() { done <- k.CaughtUp(ctx) }()
	k.ForceStop()
	require.ErrorIs(t, <-done, kafka.ErrIllegalState, "stopped while waiting")
	<-k.Done()
	require.ErrorIs(t, k.CaughtUp(ctx), kafka.ErrIllegalState, "after the stop")
}

// A partition revoked while CaughtUp waits is not waited for: a holds the
// first record of each of its partitions, b joins and takes some of them
// (a's drain of those is forced), a's kept ones are let go, and a's
// CaughtUp returns nil without the revoked ones having finished there; b's
// returns once it handled them.
func TestCaughtUpLeavesTheRevokedPartitionsToTheirNextOwner(t *testing.T) {
	const keys, perKey, partitions = 40, 5, 4
	c := startCluster(t, "moves", partitions, shortSessions)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "moves", records(keys, perKey)...))
	gates := map[int32]chan struct{}{}
	for p := range int32(partitions) {
		gates[p] = make(chan struct{})
	}
	var held atomic.Int64
	holding := func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Position == 0 {
			held.Add(1)
			select {
			case <-gates[d.Partition]:
			case <-ctx.Done(): // a revoke's force
				return context.Cause(ctx)
			}
		}
		return nil
	}
	opts := []kafka.Option{kafka.WithClientOptions(memberClientOptions...),
		kafka.WithRevokeTimeout(200 * time.Millisecond)}
	sched := newScheduler(t, 16)
	a := newConsumer(t, c, "moves", "moves", sched, holding, opts...)
	startConsumer(t, a)
	require.Eventually(t, func() bool { return held.Load() == partitions }, 20*time.Second, 5*time.Millisecond,
		"a holds the first record of every partition")
	aDone := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		aDone <- a.CaughtUp(cctx)
	}()

	var bHandled atomic.Int64
	b := newConsumer(t, c, "moves", "moves", sched, func(context.Context, partition.Delivery[event]) error {
		bHandled.Add(1)
		return nil
	}, opts...)
	startConsumer(t, b)
	require.Eventually(t, func() bool { return len(a.Owned()) < partitions && len(b.Owned()) > 0 }, 20*time.Second, 5*time.Millisecond,
		"the join moved partitions to b")
	kept := a.Owned()
	select {
	case err := <-aDone:
		require.FailNow(t, "a caught up while holding its kept partitions", "%v", err)
	default:
	}
	for _, p := range kept {
		close(gates[p])
	}
	require.NoError(t, <-aDone)
	require.Equal(t, int64(partitions-len(kept)), a.Stats().Revoked, "revoked from a")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, b.CaughtUp(cctx))
	ends := endOffsets(t, c, "moves")
	want := int64(0)
	for _, p := range b.Owned() {
		want += ends[p]
	}
	// What a finished above the records it held went into its commit's
	// finished map: b skips those, and handles the rest, the held ones first.
	skipped := b.Stats().Skipped
	require.Equal(t, want, bHandled.Load()+skipped, "b handled or skipped every record of its partitions")
	require.GreaterOrEqual(t, bHandled.Load(), int64(partitions-len(kept)), "b handled at least the records a held")
	stop(t, a)
	stop(t, b)
}
