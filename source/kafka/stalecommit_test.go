package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/source/kafka"
)

// A commit the group refuses as a zombie's (ILLEGAL_GENERATION: this
// member's generation is over) is counted in Stats.StaleCommits and logged
// at warning level, never taken as committed: the broker's next answer
// commits it.
func TestStaleCommitIsCountedAndNotTakenAsCommitted(t *testing.T) {
	const keys, perKey = 10, 3
	c := startCluster(t, "stale", 1)
	require.NoError(t, c.Produce(context.Background(), "stale", records(keys, perKey)...))
	refused := make(chan struct{})
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.IllegalGeneration.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		close(refused)
		return resp, nil, true
	})
	var logs lockedBuffer
	j := newJournal(keys * perKey)
	k := newConsumer(t, c, "stale", "stale", newScheduler(t, 2), j.handle,
		kafka.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	select {
	case <-refused:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no commit was sent")
	}
	require.Eventually(t, func() bool {
		committed, err := c.Committed(context.Background(), "stale", "stale")
		return err == nil && committed[0] == keys*perKey
	}, 20*time.Second, 10*time.Millisecond, "the next commit is acknowledged")
	stop(t, k)
	s := k.Stats()
	require.Equal(t, int64(1), s.StaleCommits, "the refused partition offset")
	require.Positive(t, s.CommitFailures)
	require.Contains(t, logs.String(), "level=WARN msg=\"kafka: commit refused: this member's generation is over\"")
	require.Contains(t, logs.String(), "ILLEGAL_GENERATION")
}
