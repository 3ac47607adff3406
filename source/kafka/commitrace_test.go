package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// holdFinalCommit makes the cluster hold the first commit of offset end
// until release is closed, then answer it (or, with refuse, answer every
// partition with RebalanceInProgress). requested closes when it arrives.
func holdFinalCommit(c *kafkatest.Cluster, end int64, refuse bool) (requested, release chan struct{}) {
	requested, release = make(chan struct{}), make(chan struct{})
	held := false // control functions run one at a time
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if held || !commits(r, end) {
			return nil, nil, false
		}
		held = true
		close(requested)
		c.Fake().SleepControl(func() { <-release })
		if !refuse {
			return nil, nil, false // answered as usual, after the stop began
		}
		return refusal(r, kerr.RebalanceInProgress.Code), nil, true
	})
	return requested, release
}

// refusal answers every partition of r with code.
func refusal(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func commits(r *kmsg.OffsetCommitRequest, offset int64) bool {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.Offset == offset {
				return true
			}
		}
	}
	return false
}

// A graceful stop begun while the commit of the last records is on its way
// to the broker: whether the broker then acknowledges that commit or
// refuses it, the stop commits the end of the partition before it leaves,
// and a consumer started after it handles nothing twice. (Marking offsets
// committed when the request leaves, not when the answer comes, lost the
// commit in the refused case.)
func TestGracefulStopRightAfterACommitRequest(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "acknowledged", true: "refused"}[refuse]
		t.Run(name, func(t *testing.T) {
			const keys, perKey = 50, 10
			const end = keys * perKey
			c := startCluster(t, "race", 1)
			ctx := context.Background()
			require.NoError(t, c.Produce(ctx, "race", records(keys, perKey)...))
			requested, release := holdFinalCommit(c, end, refuse)
			var releaseOnce sync.Once
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

			sched := newScheduler(t, 4)
			j := newJournal(end)
			k := newConsumer(t, c, "race", "race", sched, j.handle)
			startConsumer(t, k)
			j.wait(t, 20*time.Second)
			select {
			case <-requested:
			case <-time.After(20 * time.Second):
				require.FailNow(t, "the commit of the last records never came")
			}
			k.Quiesce()
			require.Equal(t, component.StateStopping, k.State())
			releaseOnce.Do(func() { close(release) })
			stop(t, k)
			require.Zero(t, j.check(t, keys, perKey))

			committed, err := c.Committed(ctx, "race", "race")
			require.NoError(t, err)
			require.Equal(t, map[int32]int64{0: end}, committed, "the end of the partition is committed")
			if refuse {
				require.Positive(t, k.Stats().CommitFailures, "the held commit was refused")
			}

			// The next consumer of the group reads only what came after.
			require.NoError(t, c.Produce(ctx, "race", &kgo.Record{Key: []byte("last"), Value: []byte("1")}))
			again := newJournal(1)
			k2 := newConsumer(t, c, "race", "race", sched, again.handle)
			startConsumer(t, k2)
			again.wait(t, 20*time.Second)
			stop(t, k2)
			again.mu.Lock()
			defer again.mu.Unlock()
			require.Equal(t, map[string][]int{"last": {1}}, again.seen, "nothing handled twice after the restart")
		})
	}
}
