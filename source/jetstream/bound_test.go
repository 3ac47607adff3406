package jetstream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// One exchange held (its handler blocks) at the bottom of a partition whose
// backlog is far above the bound: the partition stops pulling with exactly
// the bound delivered and unacknowledged (the server's count: MaxAckPending,
// derived from the bound, is never what stops it), the rest left on the
// server; the other partition is handled to its end meanwhile; once the
// held exchange finishes, everything is handled in order and acknowledged
// to the end.
func TestAStuckExchangeHoldsNoMoreThanTheBound(t *testing.T) {
	const keys, perKey, bound, batch = 100, 40, 200, 50
	e := newEnv(t, 2)
	e.publish(t, keys, perKey)
	first := uint64(0) // the stream sequence of partition 0's first exchange
	inOne := 0
	for i := range keys * perKey {
		switch p := e.topo.PartitionOf(keyName(i % keys)); {
		case p == 0 && first == 0:
			first = uint64(i + 1)
		case p == 1:
			inOne++
		}
	}
	require.Greater(t, keys*perKey-inOne, 4*bound, "a backlog far above the bound")
	require.Positive(t, inOne)

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	log := newHandledLog(keys * perKey)
	var whileHeld, ones atomic.Int64 // partition 0's exchanges handled while the first is held; partition 1's
	oneDone := make(chan struct{})
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1}), named, newSched(t), keyedCodec,
		func(ctx context.Context, d partition.Delivery[keyed]) error {
			switch {
			case d.Partition == 0 && d.Position == int64(first):
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			case d.Partition == 0:
				select {
				case <-release:
				default:
					whileHeld.Add(1)
				}
			default:
				if ones.Add(1) == int64(inOne) {
					close(oneDone)
				}
			}
			return log.handle(ctx, d)
		}, jetstream.WithMaxHeld(bound, 0), jetstream.WithFetchBatch(batch))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })

	select {
	case <-oneDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("partition 1: %d of %d handled while partition 0 is held", ones.Load(), inOne)
	}
	var ackPending, pending, waiting int
	require.Eventually(t, func() bool {
		info, err := e.js.Consumer(ctx(t), e.topo.Stream, "c-0")
		require.NoError(t, err)
		i := info.CachedInfo()
		ackPending, pending, waiting = i.NumAckPending, int(i.NumPending), i.NumWaiting
		return ackPending >= bound && waiting == 0
	}, 20*time.Second, 5*time.Millisecond, "partition 0 stopped pulling at its bound")
	require.Equal(t, bound, ackPending, "delivered and unacknowledged: the bound")
	require.Positive(t, pending, "the rest of the backlog left on the server")
	require.Less(t, whileHeld.Load(), int64(bound), "handled above the held exchange")

	once.Do(func() { close(release) })
	select {
	case <-log.all:
	case <-time.After(30 * time.Second):
		t.Fatalf("handled %d of %d", log.n, keys*perKey)
	}
	for p := range int32(2) {
		require.Eventually(t, func() bool { return e.ackFloor(t, "c", p) == e.lastSeq(t, p) }, 20*time.Second,
			5*time.Millisecond, "partition %d acknowledged to its end", p)
	}
	require.NoError(t, c.StopGracefully(ctx(t)))
	log.mu.Lock()
	defer log.mu.Unlock()
	for k := range keys {
		seqs := log.byKey[keyName(k)]
		require.Len(t, seqs, perKey)
		for i, s := range seqs {
			require.Equal(t, uint64(i+1), s, "key %d", k)
		}
	}
}
