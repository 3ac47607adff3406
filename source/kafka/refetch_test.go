package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/source/kafka"
)

// Small records under a budget the partitions reach: each pause drops the
// partition's buffered fetch in the client, fetched again on resume, so a
// fetch of more records than the partition has room for is read over and
// over. The Consumer sizes the fetches to its partitions' room: every record
// is fetched about once, in order, none lost.
func TestPausedPartitionsAreNotFetchedOverAgain(t *testing.T) {
	const keys, perKey, budget = 200, 100, 2048
	c := startCluster(t, "refetch", 4)
	rs := records(keys, perKey)
	require.NoError(t, c.Produce(context.Background(), "refetch", rs...))
	var fetched fetchCounter
	j := newJournal(len(rs))
	k := newConsumer(t, c, "g", "refetch", newScheduler(t, 2), j.handle, kafka.WithMaxPending[event](budget),
		kafka.WithClientOptions[event](kgo.WithHooks(&fetched)))
	startConsumer(t, k)
	j.wait(t, time.Minute)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey), "duplicates")
	require.Positive(t, k.Stats().Pauses, "the budget paused partitions")
	require.LessOrEqual(t, fetched.n.Load(), int64(len(rs))*5/4, "records fetched for %d handled, %d pauses",
		len(rs), k.Stats().Pauses)
}
