package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// One record held (its handler blocks) at the bottom of a partition whose
// backlog is far above the bound: the records held above the committed
// offset, finished or not, never exceed the bound plus one polled batch,
// the partition is paused, the other partition is handled to its end
// meanwhile, and once the held record finishes everything is handled in
// order and committed to the end.
func TestAStuckRecordHoldsNoMoreThanTheBound(t *testing.T) {
	const keys, perKey, bound, batch = 100, 40, 200, 50
	c := startCluster(t, "bound", 2)
	ctx := context.Background()
	rs := records(keys, perKey)
	require.NoError(t, c.Produce(ctx, "bound", rs...))
	var inZero, inOne int
	for _, r := range rs {
		if r.Partition == 0 {
			inZero++
		} else {
			inOne++
		}
	}
	require.Greater(t, inZero, 4*(bound+batch), "a backlog far above the bound")
	require.Positive(t, inOne)

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var highest atomic.Int64 // the highest offset of partition 0 handled while offset 0 is held
	j := newJournal(len(rs))
	one := newJournal(inOne)
	var mu sync.Mutex
	committed := map[int32]int64{}
	k := newConsumer(t, c, "g", "bound", newScheduler(t, 4), func(ctx context.Context, d partition.Delivery[event]) error {
		switch {
		case d.Partition == 0 && d.Position == 0:
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case d.Partition == 0:
			select {
			case <-release:
			default:
				highest.Store(max(highest.Load(), d.Position))
			}
		default:
			one.add(d.Exchange)
		}
		j.add(d.Exchange)
		return nil
	}, kafka.WithMaxHeld(bound, 0), kafka.WithMaxPollRecords(batch),
		kafka.WithClientOptions(kgo.FetchMaxWait(20*time.Millisecond)),
		kafka.WithCommitHook(func(p int32, offset int64) {
			mu.Lock()
			committed[p] = offset
			mu.Unlock()
		}))
	startConsumer(t, k)

	one.wait(t, 30*time.Second) // every record of partition 1, partition 0 held
	// Partition 0 reached its bound and was paused (partition 1 may have
	// been paused too, for a moment, by handlers behind its fetch).
	require.Eventually(t, func() bool {
		st := k.Stats()
		return st.Delivered-int64(inOne) >= bound && st.Pauses > 0
	}, 20*time.Second, 5*time.Millisecond, "partition 0 filled its bound and paused")
	held := k.Stats().Delivered - int64(inOne)
	require.LessOrEqual(t, held, int64(bound+batch), "records held above the committed offset")
	require.Less(t, highest.Load()+1, int64(bound+batch), "the highest offset handled above the held one")

	once.Do(func() { close(release) })
	j.wait(t, 30*time.Second)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return committed[0] == int64(inZero) && committed[1] == int64(inOne)
	}, 20*time.Second, 5*time.Millisecond, "committed to the end")
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey))
}
