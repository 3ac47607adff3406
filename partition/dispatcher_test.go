package partition_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

var accounts = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}

// op is an exchange: the id it addresses and its sequence number for that id.
type op struct {
	id  string
	seq int
}

// ledger records what the handlers ran: per id, the sequence numbers in the
// order handled, and whether anything ran after a release.
type ledger struct {
	mu       sync.Mutex
	seen     map[string][]int
	groups   map[int]bool
	released atomic.Bool
	late     atomic.Int64
}

func (l *ledger) handle(delay func(op) time.Duration) dispatch.Handler[partition.Delivery[op]] {
	return func(ctx context.Context, d partition.Delivery[op]) error {
		if l.released.Load() {
			l.late.Add(1)
		}
		if g, ok := dispatch.GroupOf(ctx); ok {
			l.mu.Lock()
			l.groups[g] = true
			l.mu.Unlock()
		}
		if w := delay(d.Exchange); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen[d.Exchange.id] = append(l.seen[d.Exchange.id], d.Exchange.seq)
		return nil
	}
}

func newLedger() *ledger { return &ledger{seen: map[string][]int{}, groups: map[int]bool{}} }

func newParallel(t *testing.T, n int) *schedulers.Parallel {
	t.Helper()
	s, err := schedulers.NewParallel("accounts", n)
	require.NoError(t, err)
	t.Cleanup(func() { s.Dispose(); <-s.Done() })
	return s
}

// Handlers finish out of order across groups; the prefix reaches the last
// position once all finished, each id's exchanges ran in order, and a
// partition's ids spread over many groups.
func TestDispatcherDrainsAndSettles(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 40).Draw(rt, "ids")
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		gap := rapid.Int64Range(1, 5).Draw(rt, "gap")
		delays := rapid.SliceOfN(rapid.IntRange(0, 3), 1, 8).Draw(rt, "delays ms")
		synctest.Test(t, func(t *testing.T) {
			l := newLedger()
			sched := newParallel(t, 3)
			d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
				l.handle(func(x op) time.Duration { return time.Duration(delays[x.seq%len(delays)]) * time.Millisecond }),
				partition.WithGroups(16), partition.WithMaxPending(32))
			require.NoError(t, err)
			in, err := d.Assign(t.Context(), 3, 100)
			require.NoError(t, err)
			next := map[string]int{}
			pos := int64(100)
			for i := range n {
				id := fmt.Sprint("a", i%ids)
				require.NoError(t, in.Deliver(t.Context(), op{id, next[id]}, pos, 1))
				next[id]++
				pos += gap
			}
			settled, err := d.Revoke(t.Context(), 3)
			require.NoError(t, err)
			require.True(t, settled.OK)
			require.False(t, settled.Forced)
			require.Equal(t, pos-gap, settled.Prefix, "every position finished")
			require.Equal(t, dispatch.Stats{Received: int64(n), Succeeded: int64(n)}, settled.Stats)
			for id, seqs := range l.seen {
				for i, s := range seqs {
					require.Equal(t, i, s, "id %s in order", id)
				}
			}
			if ids >= 16 && n >= 4*ids {
				require.Greater(t, len(l.groups), 4, "one partition's ids spread over the groups")
			}
		})
	})
}

// Revoking under load drains until the deadline, then forces: the prefix
// stops below what the force discarded or cancelled, and no handler of the
// partition runs once Revoke returned.
func TestRevokeUnderLoadForcesAndSettlesBelowTheDiscards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		sched := newParallel(t, 2)
		d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			l.handle(func(x op) time.Duration { return time.Duration(x.seq+1) * 10 * time.Millisecond }),
			partition.WithGroups(8))
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i := range 200 {
			require.NoError(t, in.Deliver(t.Context(), op{fmt.Sprint("a", i%10), i / 10}, int64(i+1), 1))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 55*time.Millisecond)
		defer cancel()
		settled, err := d.Revoke(ctx, 0)
		l.released.Store(true)
		require.NoError(t, err)
		require.True(t, settled.Forced)
		s := settled.Stats
		require.Equal(t, int64(200), s.Received)
		require.Positive(t, s.Discarded)
		require.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		blocked, ok := in.Tracker().Blocked()
		require.True(t, ok)
		if settled.OK {
			require.Less(t, settled.Prefix, blocked)
		}
		// Every position up to the prefix was handled, in order per id.
		handled := 0
		for _, seqs := range l.seen {
			handled += len(seqs)
		}
		require.GreaterOrEqual(t, int64(handled), settled.Prefix)
		require.ErrorIs(t, in.Deliver(t.Context(), op{"a0", 99}, 500, 1), dispatch.ErrStopped)
		time.Sleep(time.Second) // virtual: would any handler still run?
		require.Zero(t, l.late.Load(), "no handler ran after the release")
		_, err = d.Revoke(t.Context(), 0)
		require.ErrorIs(t, err, partition.ErrNotAssigned)
	})
}

// A handler that ignores its context outlives the force: Revoke returns
// after the grace with ErrNotDrained and a prefix below that exchange.
func TestRevokeBoundedByTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched := newParallel(t, 1)
		release := make(chan struct{})
		defer close(release)
		d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			func(_ context.Context, x partition.Delivery[op]) error {
				if x.Position == 2 {
					<-release // ignores its context
				}
				return nil
			}, partition.WithForceGrace(time.Second))
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 1, 1)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
		}
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		settled, err := d.Revoke(ctx, 1)
		require.ErrorIs(t, err, partition.ErrNotDrained)
		require.Equal(t, 1100*time.Millisecond, time.Since(start))
		require.Equal(t, partition.Settled{Partition: 1, Prefix: 1, OK: true, Forced: true,
			Stats: settled.Stats}, settled)
		require.Equal(t, int64(3), settled.Stats.Received)
		require.Equal(t, 2, in.Tracker().Pending(), "position 2 runs on, 3 waits behind it")
	})
}

// Lose forces at once; many partitions share the one scheduler; a
// partition is owned once; Close revokes what is left.
func TestAssignLoseClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		sched := newParallel(t, 2)
		d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			l.handle(func(op) time.Duration { return time.Millisecond }))
		require.NoError(t, err)
		ins := map[int32]*partition.Intake[op]{}
		for p := range int32(4) {
			in, err := d.Assign(t.Context(), p, 0)
			require.NoError(t, err)
			ins[p] = in
		}
		_, err = d.Assign(t.Context(), 2, 0)
		require.ErrorIs(t, err, partition.ErrAssigned)
		for p, in := range ins {
			for i := range 20 {
				require.NoError(t, in.Deliver(t.Context(), op{fmt.Sprint(p, "-", i%3), i / 3}, int64(i), 1))
			}
		}
		require.ErrorIs(t, ins[0].Deliver(t.Context(), op{"x", 0}, 19, 1), partition.ErrOutOfOrder)
		lost, err := d.Lose(0)
		require.NoError(t, err)
		require.True(t, lost.Forced)
		settled, err := d.Close(t.Context())
		require.NoError(t, err)
		require.Len(t, settled, 3)
		for _, s := range settled {
			require.Equal(t, partition.Settled{Partition: s.Partition, Prefix: 19, OK: true,
				Stats: dispatch.Stats{Received: 20, Succeeded: 20}}, s)
		}
		_, err = d.Assign(t.Context(), 9, 0)
		require.ErrorIs(t, err, partition.ErrClosed)
		_, err = partition.NewDispatcher[op]("", accounts, sched, nil, nil)
		require.ErrorIs(t, err, partition.ErrInvalidArgument)
	})
}

// A partition with nothing in flight, revoked under a ctx that has ended
// already (a rebalance callback past its deadline), needs no force: Settled
// says so. It used to report Forced whenever the ctx had ended, because the
// dispatcher's goroutines had not exited yet when StopGracefully looked.
func TestRevokeOfAnIdlePartitionIsNotForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched := newParallel(t, 2)
		d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			func(context.Context, partition.Delivery[op]) error { return nil })
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		synctest.Wait() // handled: nothing in flight
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		settled, err := d.Revoke(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, partition.Settled{Partition: 0, Prefix: 1, OK: true,
			Stats: dispatch.Stats{Received: 1, Succeeded: 1}}, settled)
	})
}

// WithKeyOrdering: a retried delivery holds back only its own aggregate's
// next deliveries; an aggregate of the same group goes on at once, as one
// of another group does, and the prefix still waits for the retried
// position.
func TestKeyOrderingRetryBlocksOnlyItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 4
		same, other := idsSharing("a", groups, true), idsSharing("a", groups, false)
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			if x.Position == 1 && x.Attempt < 3 {
				return errRefused
			}
			return nil
		}, partition.WithKeyOrdering(), partition.WithFailurePolicy(partition.FailurePolicy{Retries: 5,
			Backoff: partition.Backoff{Min: time.Second, Max: time.Second}}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i, id := range []string{"a", "a", same, other, same} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		synctest.Wait() // the retried delivery waits for its backoff; everything else that can run has run
		require.Len(t, rec.of(3), 1, "an aggregate of the retried one's group went on")
		require.Len(t, rec.of(5), 1, "and its next delivery too")
		require.Len(t, rec.of(4), 1, "another group went on")
		require.Empty(t, rec.of(2), "the retried aggregate's next delivery waits")
		pos, _ := in.Prefix()
		require.Less(t, pos, int64(1), "the prefix waits for the retried position")
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(5), settled.Prefix, "every position finished")
		require.Len(t, rec.of(1), 3, "two retries, then success")
		require.GreaterOrEqual(t, rec.of(2)[0].at, rec.of(1)[2].at, "after the retried delivery's last attempt")
		require.Zero(t, rec.of(3)[0].at)
	})
}

// DeliverBatch in batches of random sizes (runs waiting for room mid-batch
// under a small budget): the prefix reaches the last position, each id's
// exchanges ran in order, and every record was admitted once.
func TestDeliverBatchDrainsAndSettles(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 40).Draw(rt, "ids")
		n := rapid.IntRange(1, 700).Draw(rt, "n")
		sizes := rapid.SliceOfN(rapid.IntRange(1, 300), 1, 4).Draw(rt, "batch sizes")
		pending := rapid.SampledFrom([]int{1, 7, 4096}).Draw(rt, "max pending")
		delays := rapid.SliceOfN(rapid.IntRange(0, 3), 1, 8).Draw(rt, "delays ms")
		synctest.Test(t, func(t *testing.T) {
			l := newLedger()
			sched := newParallel(t, 3)
			d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
				l.handle(func(x op) time.Duration { return time.Duration(delays[x.seq%len(delays)]) * time.Millisecond }),
				partition.WithGroups(16), partition.WithMaxPending(pending))
			require.NoError(t, err)
			in, err := d.Assign(t.Context(), 3, 100)
			require.NoError(t, err)
			next := map[string]int{}
			recs := make([]partition.Record[op], n)
			for i := range recs {
				id := fmt.Sprint("a", i%ids)
				recs[i] = partition.Record[op]{Exchange: op{id, next[id]}, Position: int64(100 + 2*i), Attempt: 1}
				next[id]++
			}
			for i := 0; len(recs) > 0; i++ {
				b := recs[:min(sizes[i%len(sizes)], len(recs))]
				k, err := in.DeliverBatch(t.Context(), b)
				require.NoError(t, err)
				require.Equal(t, len(b), k)
				recs = recs[len(b):]
			}
			settled, err := d.Revoke(t.Context(), 3)
			require.NoError(t, err)
			require.True(t, settled.OK)
			require.False(t, settled.Forced)
			require.Equal(t, int64(100+2*(n-1)), settled.Prefix, "every position finished")
			require.Equal(t, dispatch.Stats{Received: int64(n), Succeeded: int64(n)}, settled.Stats)
			for id, seqs := range l.seen {
				for i, s := range seqs {
					require.Equal(t, i, s, "id %s in order", id)
				}
			}
		})
	})
}

// A position not above the last stops the batch there: the records before
// it are delivered, it and the rest are not tracked.
func TestDeliverBatchStopsAtAPositionOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
			l.handle(func(op) time.Duration { return 0 }))
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		n, err := in.DeliverBatch(t.Context(), []partition.Record[op]{
			{Exchange: op{"a", 0}, Position: 1}, {Exchange: op{"a", 1}, Position: 2},
			{Exchange: op{"a", 2}, Position: 2}, {Exchange: op{"a", 3}, Position: 3}})
		require.ErrorIs(t, err, partition.ErrOutOfOrder)
		require.ErrorContains(t, err, "partition 0")
		require.Equal(t, 2, n)
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(2), settled.Prefix)
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, settled.Stats)
		require.Equal(t, []int{0, 1}, l.seen["a"])
		require.Zero(t, in.Tracker().Pending())
	})
}

// A revocation while DeliverBatch waits for room ends it with
// dispatch.ErrStopped: the records admitted drain, the ones tracked and not
// admitted are discarded in the tracker, so the prefix stops below them
// and nothing waits for them.
func TestDeliverBatchCutByARevocationDiscardsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
			func(ctx context.Context, x partition.Delivery[op]) error {
				if x.Position == 1 {
					<-release
				}
				return nil
			}, partition.WithMaxPending(3))
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		recs := make([]partition.Record[op], 10)
		for i := range recs {
			recs[i] = partition.Record[op]{Exchange: op{"a", i}, Position: int64(i + 1), Attempt: 1}
		}
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := in.DeliverBatch(t.Context(), recs)
			done <- result{n, err}
		}()
		synctest.Wait() // 3 admitted, the first held; the batch waits for room
		require.Equal(t, 10, in.Tracker().Pending(), "the whole batch is tracked")
		revoked := make(chan partition.Settled, 1)
		go func() {
			settled, err := d.Revoke(t.Context(), 0)
			require.NoError(t, err)
			revoked <- settled
		}()
		r := <-done
		require.ErrorIs(t, r.err, dispatch.ErrStopped)
		require.ErrorContains(t, r.err, "position 4")
		require.Equal(t, 3, r.n)
		close(release)
		settled := <-revoked
		require.Equal(t, int64(3), settled.Prefix)
		require.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, settled.Stats)
		blocked, ok := in.Tracker().Blocked()
		require.True(t, ok)
		require.Equal(t, int64(4), blocked, "the first record not admitted holds the prefix")
		require.Zero(t, in.Tracker().Pending(), "nothing waits for the records not admitted")
	})
}

// DeliverBatch leaves what Deliver one record at a time (stopping at the
// first error) leaves: the same count taken, the same error, and in the
// tracker the same prefix, pending count, blocked position and room, with
// positions that go out of order mid-batch, record sizes under WithMaxHeld,
// by group or by key.
func TestDeliverBatchLeavesWhatDeliverLeaves(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 600).Draw(rt, "n")
		steps := rapid.SliceOfN(rapid.IntRange(-1, 3), n, n).Draw(rt, "position steps") // <= 0: out of order
		sizes := rapid.SliceOfN(rapid.IntRange(0, 100), n, n).Draw(rt, "sizes")
		ids := rapid.IntRange(1, 20).Draw(rt, "ids")
		keyed := rapid.Bool().Draw(rt, "key ordering")
		maxHeld := rapid.IntRange(1, 700).Draw(rt, "max held")
		pending := rapid.SampledFrom([]int{1, 5, 4096}).Draw(rt, "max pending")
		recs := make([]partition.Record[op], n)
		pos := int64(10)
		for i := range recs {
			pos += int64(steps[i])
			recs[i] = partition.Record[op]{Exchange: op{fmt.Sprint("a", i%ids), i}, Position: pos, Attempt: 1, Size: sizes[i]}
		}
		synctest.Test(t, func(t *testing.T) {
			opts := []partition.Option{partition.WithGroups(4), partition.WithMaxPending(pending),
				partition.WithMaxHeld(maxHeld, int64(50*maxHeld))}
			if keyed {
				opts = append(opts, partition.WithKeyOrdering())
			}
			d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
				func(context.Context, partition.Delivery[op]) error { return nil }, opts...)
			require.NoError(t, err)
			batch, err := d.Assign(t.Context(), 0, 10)
			require.NoError(t, err)
			single, err := d.Assign(t.Context(), 1, 10)
			require.NoError(t, err)

			nb, errb := batch.DeliverBatch(t.Context(), recs)
			ns, errs := 0, error(nil)
			for _, r := range recs {
				if errs = single.DeliverSize(t.Context(), r.Exchange, r.Position, r.Attempt, r.Size); errs != nil {
					break
				}
				ns++
			}
			require.Equal(t, ns, nb, "records taken")
			require.Equal(t, errs == nil, errb == nil, "an error: %v / %v", errs, errb)
			if errs != nil {
				require.ErrorIs(t, errb, partition.ErrOutOfOrder)
				require.ErrorIs(t, errs, partition.ErrOutOfOrder)
			}
			synctest.Wait() // every handler ended
			sb, err := d.Revoke(t.Context(), 0)
			require.NoError(t, err)
			ss, err := d.Revoke(t.Context(), 1)
			require.NoError(t, err)
			require.Equal(t, ss.Stats, sb.Stats)
			require.Equal(t, dispatch.Stats{Received: int64(nb), Succeeded: int64(nb)}, sb.Stats)
			require.Equal(t, ss.OK, sb.OK)
			require.Equal(t, ss.Prefix, sb.Prefix)
			for _, in := range []*partition.Intake[op]{batch, single} {
				require.Zero(t, in.Tracker().Pending())
			}
			bp, bok := batch.Tracker().Blocked()
			sp, sok := single.Tracker().Blocked()
			require.Equal(t, []any{sp, sok}, []any{bp, bok}, "blocked")
			require.Equal(t, single.Room(), batch.Room(), "room")
		})
	})
}

// TestDeliverBatchKeepsItsDeliveriesSlice: once a batch of a size was
// delivered, delivering another of that size allocates nothing (the
// deliveries' slice is kept; nothing else on the path allocates).
func TestDeliverBatchKeepsItsDeliveriesSlice(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
		func(context.Context, partition.Delivery[op]) error { return nil }, partition.WithGroups(16))
	require.NoError(t, err)
	in, err := d.Assign(t.Context(), 0, 1)
	require.NoError(t, err)
	recs := make([]partition.Record[op], 64)
	ids := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}
	pos := int64(1)
	deliver := func() {
		for i := range recs {
			recs[i] = partition.Record[op]{Exchange: op{ids[i%8], i}, Position: pos}
			pos++
		}
		n, err := in.DeliverBatch(t.Context(), recs)
		require.NoError(t, err)
		require.Equal(t, len(recs), n)
	}
	for range 64 { // the tracker's ring and the lanes' chunks grow to their working size
		deliver()
	}
	require.Zero(t, testing.AllocsPerRun(200, deliver))
	settled, err := d.Revoke(t.Context(), 0)
	require.NoError(t, err)
	require.Equal(t, pos-1, settled.Prefix)
}
