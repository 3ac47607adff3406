package jetstream

import (
	"context"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// A member that stalled while claiming, past its lease, must not unpin nor
// reset the durable consumer when it goes on: another member may own the
// partition by then, and a reset would deliver it again from the ack floor
// under that owner (who sees a gap and loses it) and lower the delivered
// position the claim after reads for its replay's attempts.
func TestClaimWhoseLeasePassedTouchesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, topo := oneStream(t, ctx)
	for range 3 {
		_, err := js.PublishMsg(ctx, topo.NewMsg("k", []byte("x")))
		require.NoError(t, err)
	}
	sched, err := schedulers.NewParallel("s", 1)
	require.NoError(t, err)
	defer sched.Dispose()
	noop := func(context.Context, partition.Delivery[string]) error { return nil }
	c, err := NewConsumer("c", Subscription{JetStream: js, Topology: topo}, aggregate.MaterializedNamedAggregate{Context: "t", Aggregate: "A"},
		sched, keyCodec, noop, WithDynamicAssignment("a", time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx))
	defer func() {
		c.Quiesce()
		<-c.Done()
	}()

	// The owner that claimed since: 3 positions delivered to it, pinned.
	cons, err := js.Consumer(ctx, topo.Stream, c.durable(0))
	require.NoError(t, err)
	batch, err := cons.Fetch(3, natsjs.FetchMaxWait(5*time.Second), natsjs.FetchPriorityGroup(pinGroup))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, 3, n)

	passed := newLease(0, "a", 1, mono()-1, true)
	_, err = c.openClaimed(0, passed)
	require.ErrorIs(t, err, errLeasePassed)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(3), info.Delivered.Stream, "not reset")
	require.NotEmpty(t, info.PriorityGroups)
	require.NotEmpty(t, info.PriorityGroups[0].PinnedClientID, "not unpinned")
	require.Empty(t, c.disp.Owned(), "nothing assigned")
}
