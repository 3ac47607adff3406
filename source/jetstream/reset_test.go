package jetstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// Another client pulling from a partition's durable consumer: while the
// owner holds the consumer's pin, it gets nothing; one that unpins the
// consumer first takes position 3, a delivery the partition never
// received. The partition must not acknowledge past the hole: its next pull
// is refused (the pin moved), it loses the partition and claims it again,
// and replays from the ack floor in order, so position 3 is handled and the
// consumer goes on. (Before both assignments held leases, the thief took
// position 3 unpinned and the gap itself reset the partition; the gap's
// reset is tested by the pauses with racing pulls and by the external reset
// below.)
func TestGapResetsAndReplaysInOrder(t *testing.T) {
	const n = 6
	e := newEnv(t, 1)
	e.publish(t, n, 1) // six aggregates, one exchange each, at positions 1 to 6
	release := make(chan struct{})
	entered := make(chan struct{})
	var mu sync.Mutex
	var order []string
	var firstTries []string // handled again without saying it is a redelivery
	handled := map[string]int{}
	handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if d.Position == 1 && d.Attempt == 1 {
			close(entered)
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, d.Exchange.Key)
		if handled[d.Exchange.Key]++; handled[d.Exchange.Key] > 1 && !d.Redelivered() {
			firstTries = append(firstTries, d.Exchange.Key)
		}
		return nil
	}
	// One message a pull and one in flight: once position 1 runs and 2 waits
	// for the budget, the partition has no pull waiting on the server.
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, handler,
		jetstream.WithFetchBatch(1), jetstream.WithMaxPending(1),
		jetstream.WithStaticLease("", jetstream.MinLeaseTTL, 0))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-entered
	cons, err := e.js.Consumer(ctx(t), e.topo.Stream, "c-0")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx(t))
		return err == nil && info.Delivered.Consumer == 2 && info.NumWaiting == 0
	}, 20*time.Second, 5*time.Millisecond, "positions 1 and 2 delivered, no pull waiting")

	steal := func() []natsjs.Msg {
		batch, err := cons.Fetch(1, natsjs.FetchMaxWait(time.Second), natsjs.FetchPriorityGroup("aggflow"))
		require.NoError(t, err)
		var got []natsjs.Msg
		for m := range batch.Messages() {
			got = append(got, m)
		}
		return got
	}
	require.Empty(t, steal(), "the owner's pin keeps another client out")
	stream, err := e.js.Stream(ctx(t), e.topo.Stream)
	require.NoError(t, err)
	require.NoError(t, stream.UnpinConsumer(ctx(t), "c-0", "aggflow"))
	stolen := steal() // the thief is pinned now, and takes position 3
	require.Len(t, stolen, 1)
	meta, err := stolen[0].Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 3, meta.Sequence.Stream)
	close(release)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == n
	}, 20*time.Second, 5*time.Millisecond, "every position handled, the one taken elsewhere too")
	require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == e.lastSeq(t, 0) }, 20*time.Second, 5*time.Millisecond,
		"acknowledged to the end")
	require.Equal(t, component.StateRunning, c.State(), "the consumer went on: %v", c.Err())
	require.NoError(t, c.StopGracefully(ctx(t)))
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, firstTries, "a second run is a redelivery (Attempt >= 2): %v", order)
}

// Under a lease the same: another client resets the partition's durable
// consumer, so the consumer sequence starts again at 1 where the partition
// expects 11. The partition resets under the lease it holds (same epoch,
// no handoff, no re-claim) and handles what follows once, in order.
func TestExternalResetUnderALeaseKeepsTheLease(t *testing.T) {
	const n = 10
	e := newEnv(t, 1)
	var mu sync.Mutex
	var seqs []uint64
	epochs := map[uint64]bool{}
	handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
		l, ok := jetstream.LeaseOf(ctx)
		require.True(t, ok)
		mu.Lock()
		defer mu.Unlock()
		seqs = append(seqs, d.Exchange.Seq)
		epochs[l.Epoch] = true
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub(nil), named, newSched(t), keyedCodec, handler,
		jetstream.WithDynamicAssignment("a", 10*time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	e.publish(t, 1, n)
	require.NoError(t, c.CaughtUp(ctx(t)))
	require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == n }, 20*time.Second, 5*time.Millisecond)

	_, err = e.js.ResetConsumer(ctx(t), e.topo.Stream, "c-0") // another client's reset
	require.NoError(t, err)
	require.NoError(t, e.publishFrom(ctx(t), 1, n, n))
	require.NoError(t, c.CaughtUp(ctx(t)))
	require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == 2*n }, 20*time.Second, 5*time.Millisecond)
	require.Equal(t, component.StateRunning, c.State(), "the consumer went on: %v", c.Err())
	require.NoError(t, c.StopGracefully(ctx(t)))
	mu.Lock()
	defer mu.Unlock()
	want := make([]uint64, 2*n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	require.Equal(t, want, seqs, "each once, in order")
	require.Len(t, epochs, 1, "one epoch: the partition stayed under its lease")
}

// A server lost while the consumer runs, and not back within the server
// loss timeout, fails the consumer with ErrUnreachable naming the
// partition, not before that timeout (a server back within it is ridden
// out: TestServerRestartIsRiddenOut).
func TestServerLostWhileRunning(t *testing.T) {
	const wait = 2 * time.Second
	e := newEnv(t, 2)
	e.publish(t, 10, 10)
	c := newTestConsumer(t, e, []int32{0, 1}, jetstream.WithServerLossTimeout(wait))
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	start := time.Now()
	e.srv.Shutdown()
	select {
	case <-c.Done():
	case <-ctx(t).Done():
		t.Fatal("the consumer did not stop after losing its server")
	}
	stopped := time.Since(start)
	require.ErrorIs(t, c.Err(), jetstream.ErrUnreachable)
	require.ErrorContains(t, c.Err(), "partition")
	require.GreaterOrEqual(t, stopped, wait, "it waited for the server to come back")
	t.Logf("stopped %v after the server: %v", stopped.Round(time.Millisecond), c.Err())
}
