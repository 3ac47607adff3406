package jetstream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// A claimed partition whose open times out (the server slow to answer the
// reset, on a loaded machine) is claimed and opened again on a later round,
// within the server loss timeout: the consumer does not fail, and every
// exchange is handled once.
func TestAClaimWhoseOpenTimesOutIsTriedAgain(t *testing.T) {
	for name, opt := range map[string]func(jetstream.Option) []jetstream.Option{
		"dynamic": func(f jetstream.Option) []jetstream.Option {
			return []jetstream.Option{f, jetstream.WithDynamicAssignment("a", 2*time.Second)}
		},
		"static lease": func(f jetstream.Option) []jetstream.Option {
			return []jetstream.Option{f, jetstream.WithStaticLease("a", 2*time.Second, 0)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			const keys, perKey = 8, 5
			e := newEnv(t, 2)
			e.publish(t, keys, perKey)
			var faults atomic.Int32
			fault := jetstream.WithOpenFault(func(p int32) error {
				if p == 0 && faults.Add(1) <= 2 {
					return context.DeadlineExceeded
				}
				return nil
			})
			var mu sync.Mutex
			seen := map[int64]int{}
			done := make(chan struct{})
			handler := func(_ context.Context, d partition.Delivery[keyed]) error {
				mu.Lock()
				defer mu.Unlock()
				seen[int64(d.Partition)<<32|d.Position]++
				if len(seen) == keys*perKey {
					close(done)
				}
				return nil
			}
			owned := []int32(nil)
			if name == "static lease" {
				owned = []int32{0, 1}
			}
			c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, handler, opt(fault)...)
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))
			require.NoError(t, c.Start())
			select {
			case <-done:
			case <-c.Done():
				t.Fatalf("the consumer ended: %v", c.Err())
			case <-time.After(30 * time.Second):
				t.Fatalf("not every exchange handled: %d of %d", len(seen), keys*perKey)
			}
			require.NoError(t, c.StopGracefully(ctx(t)))
			require.NoError(t, c.Err())
			require.GreaterOrEqual(t, faults.Load(), int32(3), "the open of partition 0 failed twice, then succeeded")
			mu.Lock()
			defer mu.Unlock()
			for pos, n := range seen {
				require.Equal(t, 1, n, "position %x handled once", pos)
			}
		})
	}
}
