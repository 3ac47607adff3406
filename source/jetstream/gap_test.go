package jetstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// A delivery the partition never received (another client pulled position
// 3 from its durable consumer while the partition had no pull waiting):
// the consumer sequence skips. The partition must not acknowledge past the
// hole: it resets to the ack floor and replays in order, so position 3 is
// handled, the consumer goes on, and the reset is counted.
func TestGapResetsAndReplaysInOrder(t *testing.T) {
	const n = 6
	e := newEnv(t, 1)
	e.publish(t, n, 1) // six aggregates, one exchange each, at positions 1 to 6
	release := make(chan struct{})
	entered := make(chan struct{})
	var mu sync.Mutex
	var order []string
	handled := map[string]int{}
	handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if d.Position == 1 && d.Attempt == 1 {
			close(entered)
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, d.Exchange.Key)
		handled[d.Exchange.Key]++
		return nil
	}
	// One message a pull and one in flight: once position 1 runs and 2 waits
	// for the budget, the partition has no pull waiting on the server.
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, handler,
		jetstream.WithFetchBatch[keyed](1), jetstream.WithMaxPending[keyed](1))
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

	batch, err := cons.Fetch(1, natsjs.FetchMaxWait(5*time.Second)) // another client takes position 3
	require.NoError(t, err)
	var stolen []natsjs.Msg
	for m := range batch.Messages() {
		stolen = append(stolen, m)
	}
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
	require.Equal(t, dispatch.StateRunning, c.State(), "the consumer went on: %v", c.Err())
	require.NoError(t, c.StopGracefully(ctx(t)))
	st := c.Stats()
	require.EqualValues(t, 1, st.Resets)
	require.EqualValues(t, n, st.Exchanges.Received, "the part the reset replaced counted too: %+v", st)
	require.EqualValues(t, n, st.Exchanges.Succeeded)
	mu.Lock()
	defer mu.Unlock()
	for k, times := range handled {
		require.Equal(t, 1, times, "%s handled once (positions 1 and 2 were acknowledged before the replay): %v", k, order)
	}
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
		jetstream.WithDynamicAssignment[keyed]("a", 10*time.Second))
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
	require.Equal(t, dispatch.StateRunning, c.State(), "the consumer went on: %v", c.Err())
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
