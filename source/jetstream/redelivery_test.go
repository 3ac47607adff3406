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

// A position the server queued for a pull request before the reset (the
// previous owner's, or the previous claim's) comes back for redelivery after
// the partition was delivered past it: here the previous holder naks its
// copy, as the server requeues one whose pull request was given up (the
// flake of the SIGKILL dynamic test: "track 57: not above 2071"). The
// partition received that position since its reset, so it drops the
// redelivery and goes on; it must not stop with ErrRedelivered.
func TestRedeliveryOfAPositionReceivedIsDropped(t *testing.T) {
	for name, opts := range map[string][]jetstream.Option{
		"static":  nil,
		"dynamic": {jetstream.WithDynamicAssignment("a", 10*time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			const n = 20
			e := newEnv(t, 1)
			e.publish(t, 1, n) // one aggregate: one group, handled one after the other
			release := make(chan struct{})
			var mu sync.Mutex
			var seqs []uint64
			handled := make(chan struct{})
			handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
				if d.Exchange.Seq == 1 {
					<-release // the prefix stays below every position until the redelivery came
				}
				mu.Lock()
				defer mu.Unlock()
				if seqs = append(seqs, d.Exchange.Seq); len(seqs) == n {
					close(handled)
				}
				return nil
			}
			owned := []int32{0}
			if name == "dynamic" {
				owned = nil
			}
			c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, handler, opts...)
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))

			// The previous holder: 3 positions delivered to it before the reset.
			cons, err := e.js.Consumer(ctx(t), e.topo.Stream, "c-0")
			require.NoError(t, err)
			// Both assignments pin the durable consumer to its owner's pulls.
			batch, err := cons.Fetch(3, natsjs.FetchMaxWait(5*time.Second), natsjs.FetchPriorityGroup("aggflow"))
			require.NoError(t, err)
			var stale []natsjs.Msg
			for m := range batch.Messages() {
				stale = append(stale, m)
			}
			require.NoError(t, batch.Error())
			require.Len(t, stale, 3)

			require.NoError(t, c.Start())
			require.Eventually(t, func() bool { return c.Stats().Fetched == n }, 20*time.Second, 5*time.Millisecond,
				"every position delivered since the reset")
			require.NoError(t, stale[2].Nak()) // the server queues position 3 again: it is pending since the reset
			require.Eventually(t, func() bool { return c.Stats().Fetched == n+1 }, 20*time.Second, 5*time.Millisecond,
				"the redelivery")
			require.Equal(t, component.StateRunning, c.State(), "the consumer went on: %v", c.Err())
			require.Equal(t, int64(1), c.Stats().Duplicates)
			close(release)
			select {
			case <-handled:
			case <-time.After(20 * time.Second):
				t.Fatal("not every exchange handled")
			}
			require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == e.lastSeq(t, 0) }, 20*time.Second, 5*time.Millisecond,
				"acknowledged to the end")
			require.NoError(t, c.StopGracefully(ctx(t)))
			mu.Lock()
			defer mu.Unlock()
			want := make([]uint64, n)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			require.Equal(t, want, seqs, "each once, in order")
		})
	}
}
