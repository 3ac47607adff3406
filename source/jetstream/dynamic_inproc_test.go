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

func TestDynamicAssignmentBadInput(t *testing.T) {
	e := newEnv(t, 2)
	for name, c := range map[string]struct {
		owned []int32
		opts  []jetstream.Option
	}{
		"owned too":         {[]int32{0}, []jetstream.Option{jetstream.WithDynamicAssignment("a", time.Second)}},
		"member with a dot": {nil, []jetstream.Option{jetstream.WithDynamicAssignment("a.b", time.Second)}},
		"empty member":      {nil, []jetstream.Option{jetstream.WithDynamicAssignment("", time.Second)}},
		"short ttl":         {nil, []jetstream.Option{jetstream.WithDynamicAssignment("a", time.Second-1)}},
		"zero ttl":          {nil, []jetstream.Option{jetstream.WithDynamicAssignment("a", 0)}},
		"durable no bucket": {nil, []jetstream.Option{jetstream.WithDynamicAssignment("a", time.Second),
			jetstream.WithDurable("x:y")}},
	} {
		_, err := jetstream.NewConsumer("c", e.sub(c.owned), named, newSched(t), keyedCodec, noop, c.opts...)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, name)
		if c.owned != nil {
			require.ErrorContains(t, err, "Subscription.Owned lists partitions with a dynamic assignment", name)
		}
	}
}

func TestDynamicAssignmentRefusesABucketOfAnotherTTL(t *testing.T) {
	e := newEnv(t, 2)
	a := newTestConsumer(t, e, nil, jetstream.WithDynamicAssignment("a", time.Second))
	require.NoError(t, a.Prepare(ctx(t)))
	a.Quiesce()
	<-a.Done()
	b := newTestConsumer(t, e, nil, jetstream.WithDynamicAssignment("b", 2*time.Second))
	require.ErrorIs(t, b.Prepare(ctx(t)), jetstream.ErrLeaseBucket)
	<-b.Done()
}

// One member alone claims every partition, its handlers see the leases'
// epochs, and its graceful stop releases them at once: another member
// claims them without waiting for the TTL.
func TestDynamicAssignmentAloneThenReleased(t *testing.T) {
	const keys, perKey = 20, 10
	e := newEnv(t, 4)
	e.publish(t, keys, perKey)
	var mu sync.Mutex
	epochs := map[int32]uint64{}
	done := make(chan struct{})
	n, wrong := 0, 0
	handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
		l, ok := jetstream.LeaseOf(ctx)
		mu.Lock()
		defer mu.Unlock()
		if !ok || l.Partition != d.Partition || !l.Valid() || l.Member != "a" {
			wrong++
		}
		epochs[d.Partition] = l.Epoch
		if n++; n == keys*perKey {
			close(done)
		}
		return nil
	}
	ttl := 10 * time.Second // a release that waited for the TTL would fail the bound below
	a, err := jetstream.NewConsumer("c", e.sub(nil), named, newSched(t), keyedCodec, handler,
		jetstream.WithDynamicAssignment("a", ttl))
	require.NoError(t, err)
	require.NoError(t, a.Prepare(ctx(t)))
	require.NoError(t, a.Start())
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("not every exchange handled")
	}
	require.Equal(t, []int32{0, 1, 2, 3}, a.Owned())
	require.Len(t, epochs, 4)
	mu.Lock()
	require.Zero(t, wrong, "deliveries without their partition's valid lease in their ctx")
	mu.Unlock()
	require.NoError(t, a.StopGracefully(ctx(t)))
	for p := range int32(4) {
		require.Equal(t, e.lastSeq(t, p), e.ackFloor(t, "c", p), "partition %d acknowledged to its end", p)
	}

	b := newTestConsumer(t, e, nil, jetstream.WithDynamicAssignment("b", ttl))
	require.NoError(t, b.Prepare(ctx(t)))
	require.NoError(t, b.Start())
	require.Eventually(t, func() bool { return len(b.Owned()) == 4 }, ttl/2, 10*time.Millisecond,
		"b claims the released partitions before their leases would have expired")
	require.NoError(t, b.StopGracefully(ctx(t)))
	_, ok := jetstream.LeaseOf(context.Background())
	require.False(t, ok)
}

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
