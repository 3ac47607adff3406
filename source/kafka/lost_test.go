package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// The group forgets the member (its heartbeat is answered UnknownMemberID):
// its partitions are lost, so their running handlers are cancelled and
// nothing more is committed for them; once it joined again it reads them
// from the last commit, the records read before flagged as redelivered,
// and every record ends handled once, in order.
func TestLostPartitionsAreForcedWithoutCommit(t *testing.T) {
	const keys, perKey = 40, 10
	c := startCluster(t, "lost", 2, shortSessions)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "lost", records(keys, perKey)...))

	var hang atomic.Bool
	hang.Store(true)
	cancelled := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	attempts := map[event]int{}
	j := newJournal(keys * perKey)
	firstFour := newJournal(keys * 4)
	k := newConsumer(t, c, "lost", "lost", newScheduler(t, 2*64+4), func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.Seq > 4 && hang.Load() {
			<-ctx.Done()
			once.Do(func() { hang.Store(false); close(cancelled) })
			return context.Cause(ctx)
		}
		mu.Lock()
		attempts[d.Exchange] = d.Attempt
		mu.Unlock()
		firstFour.add(d.Exchange)
		j.add(d.Exchange)
		return nil
	}, kafka.WithClientOptions(memberClientOptions...))
	startConsumer(t, k)
	firstFour.wait(t, 20*time.Second)

	c.Fake().ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the lost partitions' handlers were not cancelled")
	}
	j.wait(t, 20*time.Second)
	stop(t, k)

	require.Zero(t, j.check(t, keys, perKey))
	require.Equal(t, int64(2), k.Stats().Lost)
	mu.Lock()
	defer mu.Unlock()
	redelivered := 0
	for e, a := range attempts {
		if e.Seq <= 4 {
			require.Equal(t, 1, a, "%v: handled before the loss, once", e)
		} else if a == 2 {
			redelivered++
		}
	}
	require.Positive(t, redelivered, "records read before the loss are flagged as redelivered")
	committed, err := c.Committed(ctx, "lost", "lost")
	require.NoError(t, err)
	// The stop commits every partition's end, unless the group refused that
	// commit (a rebalance the short sessions of a loaded machine start at the
	// wrong moment): then the refusal is counted, and the next owner reads
	// the rest again, in order.
	if got := committed[0] + committed[1]; got != int64(keys*perKey) {
		require.Less(t, got, int64(keys*perKey))
		require.Positive(t, k.Stats().CommitFailures, "committed %d of %d without a refused commit", got, keys*perKey)
	}
}
