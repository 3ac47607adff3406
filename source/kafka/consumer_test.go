package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every record of every partition is handled once, in per-key order, and
// the committed offsets after a graceful stop are the end of each
// partition.
func TestConsumesInOrderAndCommitsTheEnd(t *testing.T) {
	const keys, perKey = 200, 50
	c := startCluster(t, "orders", 4)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))

	j := newJournal(keys * perKey)
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), j.handle)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey), "duplicates")

	committed, err := c.Committed(ctx, "g", "orders")
	require.NoError(t, err)
	total := int64(0)
	for _, off := range committed {
		total += off
	}
	require.Len(t, committed, 4)
	require.Equal(t, int64(keys*perKey), total, "committed offsets add up to every record")
	require.Equal(t, int64(keys*perKey), k.Stats().Delivered)
	require.Equal(t, int64(keys*perKey), k.Stats().Succeeded)
	require.Zero(t, k.Stats().Dropped)
}
