package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// commitGate answers the cluster's commit requests that match: each with
// the error code answer gives it (0: answered as usual), n counting the
// matching requests from 1, and mark the count when the test began the
// stop (0 before).
type commitGate struct {
	seen, mark atomic.Int64
	first      chan struct{} // closed at the first matching request
}

func gateCommits(c *kafkatest.Cluster, match func(*kmsg.OffsetCommitRequest) bool, answer func(n, mark int64) int16) *commitGate {
	g := &commitGate{first: make(chan struct{})}
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if !match(r) {
			return nil, nil, false
		}
		n := g.seen.Add(1)
		if n == 1 {
			close(g.first)
		}
		code := answer(n, g.mark.Load())
		if code == 0 {
			return nil, nil, false
		}
		return refusal(r, code), nil, true
	})
	return g
}

// sinceStop returns the matching requests the cluster saw after the stop
// began.
func (g *commitGate) sinceStop() int64 { return g.seen.Load() - g.mark.Load() }

const finalKeys, finalPerKey, finalEnd = 30, 5, 30 * 5

// stopAfterTheEndWasRefused starts a consumer of a one-partition topic whose
// commits of the partition's end the gate answers, waits until every
// record was handled and the end's commit was refused at least once (so the
// end can only be committed by the stop), and begins the graceful stop.
func stopAfterTheEndWasRefused(t *testing.T, topic string, answer func(n, mark int64) int16,
	opts ...kafka.Option) (*kafkatest.Cluster, *kafka.Consumer[event], *commitGate) {
	t.Helper()
	c := startCluster(t, topic, 1)
	require.NoError(t, c.Produce(context.Background(), topic, records(finalKeys, finalPerKey)...))
	g := gateCommits(c, func(r *kmsg.OffsetCommitRequest) bool { return commits(r, finalEnd) }, answer)
	j := newJournal(finalEnd)
	k := newConsumer(t, c, topic, topic, newScheduler(t, 4), j.handle, opts...)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	select {
	case <-g.first:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the end was never committed")
	}
	g.mark.Store(g.seen.Load())
	k.Quiesce()
	require.Zero(t, j.check(t, finalKeys, finalPerKey))
	return c, k, g
}

func committed(t *testing.T, c *kafkatest.Cluster, topic string) int64 {
	t.Helper()
	got, err := c.Committed(context.Background(), topic, topic)
	require.NoError(t, err)
	return got[0]
}

// The stop's commit of the end, refused three times more, is tried again
// with backoff until the broker acknowledges it: the stop then succeeds
// with the end committed. (Tried once, as before, it left the partition to
// be read again while the stop reported success.)
func TestTheFinalCommitIsTriedAgainUntilAcknowledged(t *testing.T) {
	c, k, g := stopAfterTheEndWasRefused(t, "again", func(n, mark int64) int16 {
		if mark == 0 || n <= mark+3 {
			return kerr.RequestTimedOut.Code
		}
		return 0
	})
	stop(t, k)
	require.Equal(t, int64(finalEnd), committed(t, c, "again"), "the end is committed")
	require.GreaterOrEqual(t, g.sinceStop(), int64(4), "three refusals after the stop, then the acknowledgement")
	s := k.Stats()
	require.GreaterOrEqual(t, s.CommitFailures, int64(4))
	require.Zero(t, s.Uncommitted)
	require.NoError(t, k.Err())
}

// A final commit the broker keeps refusing is tried until the revoke's
// deadline, then the stop returns an error wrapping ErrCommit and the
// broker's reason, which is the consumer's Err too: a Runtime sees it.
func TestAFinalCommitStillRefusedAtTheDeadlineIsTheConsumersError(t *testing.T) {
	c, k, g := stopAfterTheEndWasRefused(t, "refused", func(int64, int64) int16 { return kerr.RequestTimedOut.Code },
		kafka.WithRevokeTimeout(400*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := k.StopGracefully(ctx)
	require.ErrorIs(t, err, kafka.ErrCommit)
	require.ErrorIs(t, err, kerr.RequestTimedOut)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the stop ended by itself, within the revoke timeout")
	require.ErrorContains(t, err, "partitions [0]")
	require.Same(t, k.Err(), err)
	require.GreaterOrEqual(t, g.sinceStop(), int64(2), "tried again before giving up")
	require.Less(t, committed(t, c, "refused"), int64(finalEnd))
	require.Zero(t, k.Stats().Uncommitted)
}

// When the group answers that this member's generation is over, the
// partition went (or is going) to another member, which may have committed
// already: the final commit is not pressed, the stop succeeds, and the
// partition is counted as left uncommitted.
func TestAFinalCommitRefusedBecauseTheGroupMovedOnIsCountedNotAnError(t *testing.T) {
	for _, code := range []int16{kerr.IllegalGeneration.Code, kerr.RebalanceInProgress.Code} {
		t.Run(kerr.ErrorForCode(code).(*kerr.Error).Message, func(t *testing.T) {
			c, k, g := stopAfterTheEndWasRefused(t, "moved", func(_, mark int64) int16 {
				if mark == 0 {
					return kerr.RequestTimedOut.Code
				}
				return code
			})
			stop(t, k)
			require.NoError(t, k.Err())
			require.Equal(t, int64(1), k.Stats().Uncommitted)
			require.Less(t, committed(t, c, "moved"), int64(finalEnd))
			// The final commit once, and at most one periodic commit that
			// was on its way when the stop began.
			require.LessOrEqual(t, g.sinceStop(), int64(2), "not tried again")
		})
	}
}

// A force during the final commit's retries takes over: nothing more is
// tried, the consumer ends at once, and the refused commit is not an error
// (a force commits nothing: the next owner reads the partition again).
func TestAForceEndsTheFinalCommitsRetries(t *testing.T) {
	retrying := make(chan struct{})
	_, k, _ := stopAfterTheEndWasRefused(t, "forced", func(n, mark int64) int16 {
		if mark > 0 && n == mark+2 {
			close(retrying)
		}
		return kerr.RequestTimedOut.Code
	}, kafka.WithRevokeTimeout(45*time.Second)) // with the commit timeout, within the rebalance timeout (60 s)
	select {
	case <-retrying:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the final commit was not tried again")
	}
	require.Equal(t, component.StateStopping, k.State())
	k.ForceStop()
	require.Equal(t, component.StateStopped, k.State())
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the force did not end the retries")
	}
	require.NoError(t, k.Err())
	require.Zero(t, k.Stats().Uncommitted)
}

// A partition revoked by a rebalance whose final commit fails for good
// stops the consumer by itself, with ErrCommit as its Err: it cannot
// commit what it handles.
func TestARevokedPartitionsFailedFinalCommitStopsTheConsumer(t *testing.T) {
	const keys, perKey = 40, 5
	c := startCluster(t, "revoked", 2, shortSessions)
	require.NoError(t, c.Produce(context.Background(), "revoked", records(keys, perKey)...))
	// Every commit is refused: the periodic ones too, so that the revoked
	// partition's end is left to its final commit.
	gateCommits(c, func(*kmsg.OffsetCommitRequest) bool { return true },
		func(int64, int64) int16 { return kerr.RequestTimedOut.Code })
	opts := []kafka.Option{kafka.WithClientOptions(memberClientOptions...),
		kafka.WithRevokeTimeout(300 * time.Millisecond)}
	sched := newScheduler(t, 8)
	j := newJournal(keys * perKey)
	a := newConsumer(t, c, "revoked", "revoked", sched, j.handle, opts...)
	startConsumer(t, a)
	j.wait(t, 20*time.Second)
	require.Len(t, a.Owned(), 2)

	b := newConsumer(t, c, "revoked", "revoked", sched, func(context.Context, partition.Delivery[event]) error { return nil }, opts...)
	startConsumer(t, b)
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the consumer whose final commit failed did not stop")
	}
	require.ErrorIs(t, a.Err(), kafka.ErrCommit)
	require.ErrorIs(t, a.Err(), kerr.RequestTimedOut)
	require.Positive(t, a.Stats().Revoked)
}

// A Runtime that stops the consumer returns the failed final commit.
func TestARuntimeReturnsTheFailedFinalCommit(t *testing.T) {
	c := startCluster(t, "unit", 1)
	require.NoError(t, c.Produce(context.Background(), "unit", records(finalKeys, finalPerKey)...))
	g := gateCommits(c, func(r *kmsg.OffsetCommitRequest) bool { return commits(r, finalEnd) },
		func(int64, int64) int16 { return kerr.RequestTimedOut.Code })
	j := newJournal(finalEnd)
	k := newConsumer(t, c, "unit", "unit", newScheduler(t, 4), j.handle, kafka.WithRevokeTimeout(300*time.Millisecond))
	rt, err := component.NewRuntime("unit", []component.Component{k})
	require.NoError(t, err)
	t.Cleanup(func() { rt.ForceStop(); <-rt.Done() })
	require.NoError(t, rt.Prepare(context.Background()))
	require.NoError(t, rt.Start())
	j.wait(t, 20*time.Second)
	select {
	case <-g.first:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the end was never committed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = rt.StopGracefully(ctx)
	require.ErrorIs(t, err, kafka.ErrCommit)
	require.NotErrorIs(t, err, dispatch.ErrShutdownTimeout)
	<-rt.Done() // Err is fixed at the Runtime's physical end
	require.ErrorIs(t, rt.Err(), kafka.ErrCommit)
}
