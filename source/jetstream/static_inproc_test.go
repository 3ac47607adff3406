package jetstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

func TestStaticLeaseBadInput(t *testing.T) {
	e := newEnv(t, 2)
	for name, opts := range map[string][]jetstream.Option{
		"with a dynamic assignment": {jetstream.WithDynamicAssignment("a", time.Second), jetstream.WithStaticLease("a", 0, 0)},
		"member with a dot":         {jetstream.WithStaticLease("a.b", 0, 0)},
		"short ttl":                 {jetstream.WithStaticLease("a", time.Second-1, 0)},
		"negative wait":             {jetstream.WithStaticLease("a", 0, -time.Second)},
		"durable no bucket":         {jetstream.WithDurable("x:y")},
	} {
		owned := []int32{0}
		if name == "with a dynamic assignment" {
			owned = nil
		}
		_, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, noop, opts...)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, name)
	}
}

// A static consumer holds the leases of its partitions, under a member name
// of its own (two consumers of one process included), and its handlers see
// them (LeaseOf).
func TestStaticAssignmentHoldsLeases(t *testing.T) {
	const keys, perKey = 20, 10
	e := newEnv(t, 2)
	e.publish(t, keys, perKey)
	var mu sync.Mutex
	members := map[string]bool{}
	n, wrong := 0, 0
	done := make(chan struct{})
	handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
		l, ok := jetstream.LeaseOf(ctx)
		mu.Lock()
		defer mu.Unlock()
		if !ok || l.Partition != d.Partition || !l.Valid() || l.Epoch == 0 {
			wrong++
		}
		members[l.Member] = true
		if n++; n == keys*perKey {
			close(done)
		}
		return nil
	}
	var cs []*jetstream.Consumer[keyed]
	for p := range int32(2) {
		c, err := jetstream.NewConsumer("c", e.sub([]int32{p}), named, newSched(t), keyedCodec, handler)
		require.NoError(t, err)
		require.NoError(t, c.Prepare(ctx(t)))
		require.NoError(t, c.Start())
		require.Equal(t, []int32{p}, c.Owned(), "a free partition is opened by Start")
		cs = append(cs, c)
	}
	select {
	case <-done:
	case <-ctx(t).Done():
		t.Fatal("not every exchange handled")
	}
	owners := e.leaseHolders(t, "c", 2)
	require.NotEqual(t, owners[0], owners[1], "one member name per consumer")
	mu.Lock()
	require.Zero(t, wrong, "deliveries without their partition's valid lease in their ctx")
	require.Equal(t, map[string]bool{owners[0]: true, owners[1]: true}, members)
	mu.Unlock()
	for _, c := range cs {
		require.NoError(t, c.StopGracefully(ctx(t)))
	}
	require.Equal(t, []string{"", ""}, e.leaseHolders(t, "c", 2), "a graceful stop releases its leases")
}

// A second static consumer of a partition the first holds waits for it,
// then fails with ErrOwned naming the partition and the holder; a first
// owner stopped by force (its leases left to expire, as a kill -9 leaves
// them) is waited for and taken over.
func TestStaticAssignmentSecondOwnerWaitsThenIsRefused(t *testing.T) {
	const ttl, wait = time.Second, 3 * time.Second
	e := newEnv(t, 2)
	e.publish(t, 10, 10)
	a := newTestConsumer(t, e, []int32{0, 1}, jetstream.WithStaticLease("a", ttl, wait))
	require.NoError(t, a.Prepare(ctx(t)))
	require.NoError(t, a.Start())
	defer a.ForceStop()

	b := newTestConsumer(t, e, []int32{1}, jetstream.WithStaticLease("b", ttl, wait))
	require.NoError(t, b.Prepare(ctx(t)))
	start := time.Now()
	require.NoError(t, b.Start(), "a partition held is waited for in the background")
	require.Empty(t, b.Owned())
	select {
	case <-b.Done():
	case <-time.After(wait + 10*time.Second):
		t.Fatal("b was not refused")
	}
	took := time.Since(start)
	require.ErrorIs(t, b.Err(), jetstream.ErrOwned)
	require.ErrorContains(t, b.Err(), `partition 1 is held by member "a"`)
	require.GreaterOrEqual(t, took, wait, "refused once the wait was over")
	require.Equal(t, component.StateRunning, a.State(), "the holder goes on")

	a.ForceStop() // its leases expire within the TTL
	<-a.Done()
	c := newTestConsumer(t, e, []int32{0, 1}, jetstream.WithStaticLease("c", ttl, 10*time.Second))
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	require.Eventually(t, func() bool { return len(c.Owned()) == 2 }, 10*time.Second, 10*time.Millisecond, "c takes the expired leases over")
	require.NoError(t, c.StopGracefully(ctx(t)))
	require.NoError(t, c.Err())
}

// leaseHolders returns each of n partitions' lease holder in the bucket of
// durable, "" for none.
func (e *env) leaseHolders(t testing.TB, durable string, n int) []string {
	t.Helper()
	owners := make([]string, n)
	kv, err := e.js.KeyValue(ctx(t), jetstream.LeaseBucket(durable))
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		return owners
	}
	require.NoError(t, err)
	for p := range owners {
		entry, err := kv.Get(ctx(t), "p."+itoa(p))
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			continue
		}
		require.NoError(t, err)
		owners[p], _ = jetstream.ParseLease(entry.Value(), entry.Revision())
	}
	return owners
}

// A static owner whose lease another client took (here: overwrote) loses
// the partition at its next renewal and, a static assignment not being
// handed around, fails with ErrLeaseLost naming the holder; one whose lease
// was deleted (nobody holds it) claims it again under a new epoch and goes
// on, replaying from the ack floor.
func TestStaticAssignmentLosesATakenLease(t *testing.T) {
	for _, taken := range []bool{true, false} {
		name := map[bool]string{true: "taken", false: "deleted"}[taken]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.publish(t, 5, 2)
			var mu sync.Mutex
			epochs := map[uint64]int{}
			handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
				l, _ := jetstream.LeaseOf(ctx)
				mu.Lock()
				epochs[l.Epoch]++
				mu.Unlock()
				return nil
			}
			c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, handler,
				jetstream.WithStaticLease("a", time.Second, 0))
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))
			require.NoError(t, c.Start())
			defer c.ForceStop()
			require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == e.lastSeq(t, 0) }, 10*time.Second, 5*time.Millisecond)
			kv, err := e.js.KeyValue(ctx(t), jetstream.LeaseBucket("c"))
			require.NoError(t, err)
			if taken {
				_, err = kv.Put(ctx(t), "p.0", []byte("intruder"))
				require.NoError(t, err)
				select {
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the consumer went on after its lease was taken")
				}
				require.ErrorIs(t, c.Err(), jetstream.ErrLeaseLost)
				require.ErrorIs(t, c.Err(), jetstream.ErrOwned)
				require.ErrorContains(t, c.Err(), `member "intruder" holds it now`)
				return
			}
			first, err := kv.Get(ctx(t), "p.0")
			require.NoError(t, err)
			require.NoError(t, kv.Delete(ctx(t), "p.0"))
			var again uint64
			require.Eventually(t, func() bool {
				entry, err := kv.Get(ctx(t), "p.0")
				if err != nil {
					return false
				}
				member, epoch := jetstream.ParseLease(entry.Value(), entry.Revision())
				again = epoch
				return member == "a" && epoch > first.Revision()
			}, 10*time.Second, 5*time.Millisecond, "claimed again")
			e.publish(t, 5, 2)
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return epochs[again] == 10
			}, 10*time.Second, 5*time.Millisecond, "handled under the second claim")
			require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == e.lastSeq(t, 0) }, 10*time.Second, 5*time.Millisecond)
			require.Equal(t, []string{"a"}, e.leaseHolders(t, "c", 1))
			require.NoError(t, c.StopGracefully(ctx(t)))
		})
	}
}

// Two consumers given one member name by mistake do not wait for each
// other for ever: the second is refused once its wait is over, as with two
// names.
func TestStaticAssignmentOfOneMemberNameTwiceIsRefused(t *testing.T) {
	const ttl, wait = time.Second, 2 * time.Second
	e := newEnv(t, 1)
	a := newTestConsumer(t, e, []int32{0}, jetstream.WithStaticLease("pod-0", ttl, wait))
	require.NoError(t, a.Prepare(ctx(t)))
	require.NoError(t, a.Start())
	defer a.ForceStop()
	b := newTestConsumer(t, e, []int32{0}, jetstream.WithStaticLease("pod-0", ttl, wait))
	require.NoError(t, b.Prepare(ctx(t)))
	require.NoError(t, b.Start())
	select {
	case <-b.Done():
	case <-time.After(wait + 10*time.Second):
		t.Fatal("b waits for a lease of its own name for ever")
	}
	require.ErrorIs(t, b.Err(), jetstream.ErrOwned)
	require.ErrorContains(t, b.Err(), `held by member "pod-0"`)
}
