package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// startLagged starts a consumer of every partition of e with handler h.
func startLagged(t *testing.T, e *env, h dispatch.Handler[partition.Delivery[keyed]]) *jetstream.Consumer[keyed] {
	t.Helper()
	owned := make([]int32, e.topo.Partitions)
	for p := range owned {
		owned[p] = int32(p)
	}
	c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, h,
		jetstream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })
	return c
}

// CaughtUp returns only once every message published before the call was
// handled, those the failure policy settled included, twice in a row with
// messages published in between; Lag is zero everywhere then.
func TestCaughtUpReturnsOnceThePublishedMessagesAreHandled(t *testing.T) {
	const keys, perKey, partitions = 50, 40, 4
	e := newEnv(t, partitions)
	var handled atomic.Int64
	gate := make(chan struct{})
	h := func(ctx context.Context, d partition.Delivery[keyed]) error {
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
	e.publish(t, keys, perKey)
	c := startLagged(t, e, h)

	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.CaughtUp(cctx)
		done <- err
		if err == nil {
			done <- fmt.Errorf("%d handled", handled.Load())
		}
	}()
	close(gate)
	require.NoError(t, <-done)
	require.EqualError(t, <-done, fmt.Sprintf("%d handled", keys*perKey), "handled when CaughtUp returned")

	e.publish(t, keys, perKey)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.CaughtUp(cctx))
	require.Equal(t, int64(2*keys*perKey), handled.Load(), "handled when the second CaughtUp returned")
	lag := c.Lag()
	require.Len(t, lag, partitions, "a lag per owned partition")
	for p, n := range lag {
		require.Zero(t, n, "partition %d", p)
	}
	require.Equal(t, int64(2*keys*perKey/10), c.Stats().Failures.Settled, "settled messages, of both rounds")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.StopGracefully(sctx))
}

// With one message held by its handler, CaughtUp does not return before
// its ctx ends, and its error names the held message's partition and how
// many messages are behind there; Lag says the same.
func TestCaughtUpNamesThePartitionBehindAStuckMessage(t *testing.T) {
	const keys, perKey, partitions = 20, 10, 4
	e := newEnv(t, partitions)
	release := make(chan struct{})
	stuck := make(chan partition.Delivery[keyed], 1)
	h := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if d.Exchange.Key == keyName(0) && d.Exchange.Seq == 1 {
			stuck <- d
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	e.publish(t, keys, perKey)
	c := startLagged(t, e, h)
	d := <-stuck
	// key-0's first message is the first published: the first of its
	// partition, so nothing of the partition finishes before it, and every
	// message of the partition is behind.
	p := e.topo.PartitionOf(keyName(0))
	require.Equal(t, p, d.Partition)
	behind := 0
	for k := range keys {
		if e.topo.PartitionOf(keyName(k)) == p {
			behind += perKey
		}
	}

	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := c.CaughtUp(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), fmt.Sprintf("partition %d: %d behind", p, behind))
	require.Equal(t, int64(behind), c.Lag()[p], "lag of the held message's partition")

	close(release)
	cctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.CaughtUp(cctx))
}

// CaughtUp refuses before Start, and one waiting behind a held message
// when the consumer stops returns ErrIllegalState, not nil: the stop
// released every partition, which does not make the consumer caught up.
func TestCaughtUpRefusesAConsumerNotRunning(t *testing.T) {
	e := newEnv(t, 2)
	stuck := make(chan struct{})
	h := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if d.Exchange.Key == keyName(0) && d.Exchange.Seq == 1 {
			close(stuck)
			<-ctx.Done() // until the force
		}
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1}), named, newSched(t), keyedCodec, h,
		jetstream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.ErrorIs(t, c.CaughtUp(ctx(t)), jetstream.ErrIllegalState, "before Start")
	e.publish(t, 4, 2)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-stuck
	done := make(chan error, 1)
	go func() { done <- c.CaughtUp(ctx(t)) }()
	c.ForceStop()
	require.ErrorIs(t, <-done, jetstream.ErrIllegalState, "stopped while waiting")
	<-c.Done()
	require.ErrorIs(t, c.CaughtUp(ctx(t)), jetstream.ErrIllegalState, "after the stop")
}
