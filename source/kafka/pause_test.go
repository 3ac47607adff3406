package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// A partition whose handlers are stuck is paused once its pending records
// reach its share of the budget; the other partition's records keep being
// delivered and handled meanwhile, and the stuck one resumes once its
// handlers go on. The records pending stay within the budget plus one
// polled batch.
func TestASlowPartitionIsPausedAndTheOthersGoOn(t *testing.T) {
	const keys, perKey, budget, batch = 100, 10, 20, 10
	c := startCluster(t, "pause", 2)
	ctx := context.Background()
	rs := records(keys, perKey)
	require.NoError(t, c.Produce(ctx, "pause", rs...))
	inOne := 0
	for _, r := range rs {
		if r.Partition == 1 {
			inOne++
		}
	}
	require.Positive(t, inOne)
	require.Less(t, inOne, len(rs))

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	j := newJournal(len(rs))
	one := newJournal(inOne)
	k := newConsumer(t, c, "g", "pause", newScheduler(t, 4), func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Partition == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			one.add(d.Exchange)
		}
		j.add(d.Exchange)
		return nil
	}, kafka.WithMaxPending(budget), kafka.WithMaxPollRecords(batch),
		kafka.WithGroups(2), // partition 0 holds 2 of the 4 goroutines
		// A resumed partition is fetched once the fetch in flight for the
		// other one (which has nothing new) returns: keep that wait short.
		kafka.WithClientOptions(kgo.FetchMaxWait(20*time.Millisecond)))
	startConsumer(t, k)

	one.wait(t, 20*time.Second) // every record of partition 1, partition 0 stuck
	stuck := k.Stats().Delivered - int64(inOne)
	require.GreaterOrEqual(t, stuck, int64(budget/2), "partition 0 filled its share")
	require.LessOrEqual(t, stuck, int64(budget+batch), "partition 0 was paused")

	once.Do(func() { close(release) })
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey))
}
