package dispatch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// keySerial checks that no id's handler ran while another of the same id
// did: GroupSerial with a group of each id.
func keySerial(calls []testkit.Call) error {
	ids := map[string]int{}
	cs := slices.Clone(calls)
	for i := range cs {
		n, ok := ids[cs[i].Key]
		if !ok {
			n = len(ids)
			ids[cs[i].Key] = n
		}
		cs[i].Group = n
	}
	return testkit.GroupSerial(cs)
}

// requireKeyOrdered checks a finished key-ordered run of n exchanges: each
// id's exchanges handled in order and one at a time, none lost.
func requireKeyOrdered(t *testing.T, n int64, d *dispatch.Dispatcher[testkit.Exchange], rec *testkit.Recorder[testkit.Exchange]) {
	t.Helper()
	calls := rec.Calls()
	require.NoError(t, testkit.PerKeyFIFO(calls))
	require.NoError(t, keySerial(calls))
	require.NoError(t, testkit.NoLoss(n, d.Stats(), calls))
}

// serial is the ordering check of a mode: one group's handlers one at a
// time, or, WithKeyOrdering, one id's.
func serial(perKey bool, calls []testkit.Call) error {
	if perKey {
		return keySerial(calls)
	}
	return testkit.GroupSerial(calls)
}

// With one group, one id blocked in its handler blocks only itself under
// WithKeyOrdering: every other id's exchanges are handled meanwhile, in
// order, and the blocked id's wait behind its first.
func TestKeyOrderingBlockedIDBlocksOnlyItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const others, per = 20, 10
		blocked := aggregate.NewID(orders, "blocked")
		release := make(chan struct{})
		var xs []testkit.Exchange
		for i := range per {
			xs = append(xs, testkit.Exchange{ID: blocked, Seq: i})
			for k := range others {
				xs = append(xs, testkit.Exchange{ID: aggregate.NewID(orders, "id-"+strconv.Itoa(k)), Seq: i})
			}
		}
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(1) },
			func(ctx context.Context, x testkit.Exchange) error {
				if x.ID == blocked && x.Seq == 0 {
					<-release
				}
				return nil
			})
		d := started(t, flux.FromSlice(xs), rec.Handle, dispatch.WithParallelism(1),
			dispatch.WithScheduler(newParallel(t, 2)), dispatch.WithKeyOrdering())
		synctest.Wait()
		s := d.Stats()
		assert.Equal(t, int64(others*per), s.Succeeded, "every other id flowed past the blocked one")
		assert.Equal(t, int64(per), s.InFlight, "only the blocked id's exchanges wait")
		close(release)
		<-d.Done()
		requireKeyOrdered(t, int64(len(xs)), d, rec)
	})
}

// Ids of one HashCode share a group and, in the index of lanes by id, a
// hash: with 64 of them active at once the index turns to hashing the ids
// midway, and every id's exchanges still run in order, each once.
func TestKeyOrderingIDsOfOneHashCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ids, per = 64, 5
		release := make(chan struct{})
		var xs []testkit.Exchange
		for i := range per {
			for k := range ids {
				id := ""
				for bit := range 6 { // "Aa" and "BB" hash alike, so do strings of them
					id += [2]string{"Aa", "BB"}[k>>bit&1]
				}
				xs = append(xs, testkit.Exchange{ID: aggregate.NewID(orders, id), Seq: i})
			}
		}
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(1) },
			func(ctx context.Context, x testkit.Exchange) error {
				<-release
				return nil
			})
		d := started(t, flux.FromSlice(xs), rec.Handle, dispatch.WithParallelism(16),
			dispatch.WithScheduler(newParallel(t, 2)), dispatch.WithKeyOrdering())
		synctest.Wait()
		assert.Equal(t, int64(len(xs)), d.Stats().InFlight, "every exchange admitted")
		assert.True(t, dispatch.KeyTableHashesIDs(d), "64 lanes of one HashCode")
		close(release)
		<-d.Done()
		require.NoError(t, d.Err())
		requireKeyOrdered(t, int64(len(xs)), d, rec)
	})
}

// Many ids, each active for a moment: the lanes kept stay near the ids
// active at once (the budget and the running handlers), not the ids seen,
// and lanes reused for other ids keep each id's order.
func TestKeyOrderingReclaimsIdleLanes(t *testing.T) {
	const ids, per, budget, pool = 3000, 3, 8, 2
	r := rand.New(rand.NewPCG(1, 2))
	var xs []testkit.Exchange
	seq := make([]int, ids)
	for range ids * per {
		// ids come and go: each draws from a window of 16 moving ids
		k := min(len(xs)/per+r.IntN(16), ids-1)
		xs = append(xs, testkit.Exchange{ID: aggregate.NewID(orders, "id-"+strconv.Itoa(k)), Seq: seq[k]})
		seq[k]++
	}
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(1) }, testkit.Perform)
	d := started(t, flux.FromSlice(xs), rec.Handle, dispatch.WithMaxPending(budget),
		dispatch.WithScheduler(newParallel(t, pool)), dispatch.WithKeyOrdering())
	<-d.Done()
	require.NoError(t, d.Err())
	requireKeyOrdered(t, int64(len(xs)), d, rec)
	lanes := dispatch.KeyLanes(d)
	t.Logf("%d lanes kept for %d ids", lanes, ids)
	assert.Positive(t, lanes, "lanes by id")
	assert.LessOrEqual(t, lanes, 4*(budget+pool)+32, "lanes kept for %d ids seen", ids)
}

// NewKeyed's key is a group: it orders by id with WithKeyOrderingBy only,
// which New and NewMain refuse, as a nil id function.
func TestKeyOrderingRefusedByNewKeyed(t *testing.T) {
	zero := func(testkit.Exchange) int { return 0 }
	_, err := dispatch.NewKeyed("orders", orders, flux.Empty[testkit.Exchange](), zero,
		testkit.Perform, dispatch.WithKeyOrdering())
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithKeyOrderingBy")
	by := dispatch.WithKeyOrderingBy(func(x testkit.Exchange) string { return x.ID.ID })
	_, err = dispatch.New("orders", orders, flux.Empty[testkit.Exchange](), testkit.Perform, by)
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	sup, err := aggregate.NewSchedulerSupplier("orders")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sup.StopGracefully(context.Background())) })
	_, err = dispatch.NewMain("orders", []aggregate.NamedAggregate{orders}, flux.Empty[testkit.Exchange](), testkit.Perform,
		sup, by)
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	_, err = dispatch.NewKeyed("orders", orders, flux.Empty[testkit.Exchange](), zero, testkit.Perform,
		dispatch.WithKeyOrderingBy[testkit.Exchange](nil))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
}

// NewKeyed WithKeyOrderingBy: one group, ids (the empty one too) apart; one
// blocked id holds back only itself.
func TestKeyOrderingByOnNewKeyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var xs []testkit.Exchange
		for i := range 30 {
			xs = append(xs, testkit.Exchange{ID: aggregate.NewID(orders, []string{"blocked", "", "b"}[i%3]), Seq: i / 3})
		}
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(1) },
			func(ctx context.Context, x testkit.Exchange) error {
				if x.ID.ID == "blocked" && x.Seq == 0 {
					<-release
				}
				return nil
			})
		d := startedKeyed(t, flux.FromSlice(xs), func(testkit.Exchange) int { return 0 }, rec.Handle,
			dispatch.WithParallelism(1), dispatch.WithScheduler(newParallel(t, 2)),
			dispatch.WithKeyOrderingBy(func(x testkit.Exchange) string { return x.ID.ID }))
		synctest.Wait()
		assert.Equal(t, dispatch.Stats{Received: 30, Succeeded: 20, InFlight: 10}, d.Stats())
		close(release)
		<-d.Done()
		requireKeyOrdered(t, 30, d, rec)
	})
}

// ForceStop in per-key mode: every id's first exchange ran at once (one
// group), and every exchange that had not started is discarded, once.
func TestKeyOrderingForceReportsEachUndoneOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var xs []testkit.Exchange
		for i := range 50 {
			xs = append(xs, testkit.Exchange{ID: aggregate.NewID(orders, "id-"+strconv.Itoa(i%5)), Seq: i / 5, Do: testkit.Block})
		}
		var discarded atomic.Int64
		var mu sync.Mutex
		seen := map[string]bool{}
		d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithScheduler(newParallel(t, 8)),
			dispatch.WithKeyOrdering(), dispatch.WithParallelism(1),
			dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
				if !errors.Is(reason, dispatch.ErrForceStopped) {
					t.Errorf("discarded for %v", reason)
				}
				k := x.ID.ID + "#" + strconv.Itoa(x.Seq)
				mu.Lock()
				defer mu.Unlock()
				if seen[k] {
					t.Errorf("%s discarded twice", k)
				}
				seen[k] = true
				discarded.Add(1)
			}))
		synctest.Wait()
		assert.Equal(t, dispatch.Stats{Received: 50, InFlight: 50}, d.Stats())
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: 50, Failed: 5, Discarded: 45}, s, "the 5 ids' first ran at once, the rest were discarded")
		assert.Equal(t, int64(45), discarded.Load())
	})
}

// The lane a new id looks at for reuse may be idle with an exchange in it:
// pushed while its consumer was leaving (after its mark, so unseen by its
// last look at the queue, and while it ran, so without a kick), before the
// consumer's look-again. The new id takes the lane over, finds the exchange
// and schedules it rather than reusing the lane: the exchange is handled,
// once, and the new id gets a lane of its own. (Here the look-again comes
// after the take-over, so it would find the exchange too; one that comes
// during it fails its CAS, and then only the take-over schedules. The hooks
// cannot place it there: the force-race property's interleavings may.)
func TestKeyOrderingReuseFindsAnExchangeLeftInALeavingLane(t *testing.T) {
	a, b := aggregate.NewID(orders, "a"), aggregate.NewID(orders, "b")
	var d *dispatch.Dispatcher[testkit.Exchange]
	var marks, idles atomic.Int32
	emitted := make(chan error, 2)
	restoreMark := dispatch.SetTestHookMark(func() {
		if marks.Add(1) == 1 { // a's consumer, leaving after a#0: a#1 comes, unseen
			emitted <- d.Emit(context.Background(), testkit.Exchange{ID: a, Seq: 1})
		}
	})
	restoreIdle := dispatch.SetTestHookIdle(func() {
		if idles.Add(1) == 1 { // a's lane is idle and holds a#1: b comes and looks at it
			emitted <- d.Emit(context.Background(), testkit.Exchange{ID: b, Seq: 0})
		}
	})
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(1) }, testkit.Perform)
	sched, err := schedulers.NewParallel("test", 1)
	require.NoError(t, err)
	d = started(t, nil, rec.Handle, dispatch.WithScheduler(sched), dispatch.WithKeyOrdering())
	require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: a, Seq: 0}))
	require.NoError(t, <-emitted)
	require.NoError(t, <-emitted)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, d.StopGracefully(ctx), "a#1 left in a's lane is handled")
	require.NoError(t, sched.DisposeGracefully(ctx)) // the last consumer left its lane
	restoreMark()
	restoreIdle()
	calls := rec.Calls()
	require.NoError(t, testkit.PerKeyFIFO(calls))
	require.NoError(t, testkit.NoLoss(3, d.Stats(), calls))
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, d.Stats())
	assert.Equal(t, 2, dispatch.KeyLanes(d), "a kept its lane, b got one")
}

// Many ids churning through few lanes (each id's exchanges far apart, the
// lanes reused for new ids over and over, the key index growing and
// shifting): no id's handler ever runs twice at once, which a lookup that
// missed an id's lane would allow, each id keeps its order, and nothing is
// lost, at budgets small and large.
func TestKeyOrderingManyChurningIDsStaySerial(t *testing.T) {
	const ids, n = 60_000, 150_000
	r := rand.New(rand.NewPCG(3, 9))
	xs := make([]testkit.Exchange, n)
	next := make([]int, ids)
	for i := range xs {
		k := r.IntN(ids)
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "o-"+strconv.Itoa(k)), Seq: next[k]}
		next[k]++
	}
	for _, pending := range []int{1, 7, 4096} {
		t.Run("maxPending="+strconv.Itoa(pending), func(t *testing.T) {
			var running sync.Map // id -> *atomic.Int32
			last := make([]atomic.Int64, ids)
			var twice, outOfOrder, handled atomic.Int64
			d := started(t, flux.FromSlice(xs), func(_ context.Context, x testkit.Exchange) error {
				c, _ := running.LoadOrStore(x.ID.ID, new(atomic.Int32))
				if c.(*atomic.Int32).Add(1) != 1 {
					twice.Add(1)
				}
				k, _ := strconv.Atoi(x.ID.ID[2:])
				if last[k].Swap(int64(x.Seq)+1) != int64(x.Seq) {
					outOfOrder.Add(1)
				}
				handled.Add(1)
				c.(*atomic.Int32).Add(-1)
				return nil
			}, dispatch.WithKeyOrdering(), dispatch.WithParallelism(64), dispatch.WithMaxPending(pending))
			<-d.Done()
			require.NoError(t, d.Err())
			assert.Zero(t, twice.Load(), "an id's handler ran twice at once")
			assert.Zero(t, outOfOrder.Load(), "an id's exchanges out of order")
			assert.Equal(t, int64(n), handled.Load())
			assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
		})
	}
}

// slowID is an exchange whose AggregateID, once describing is set, waits
// (in virtual time) before it answers: the user code a graceful stop's
// description of what runs calls with no lock held.
type slowID struct {
	id         string
	describing *atomic.Bool
}

func (x slowID) AggregateID() aggregate.ID {
	if x.id == "x" && x.describing.CompareAndSwap(true, false) {
		time.Sleep(300 * time.Millisecond)
	}
	return aggregate.NewID(orders, x.id)
}

// emitFunc is a Source of a function.
type emitFunc[T any] func(ctx context.Context, emit func(T) error) error

func (f emitFunc[T]) Subscribe(ctx context.Context, emit func(T) error) error { return f(ctx, emit) }

// A graceful stop that times out names the groups of the running lanes.
// Meanwhile one of those lanes goes idle and is given to a new id in
// another group: the description reads each lane's group where it found the
// lane running, under the lock the producer moves it under, not after
// (-race fails). Virtual time only orders the steps, with no edge between
// the goroutines: x runs 500 ms, y 100 ms; the stop gives up at 30 ms, its
// description then waits in x's AggregateID until 330 ms; at 200 ms the
// source hands on z, which takes y's lane.
func TestKeyOrderingDescriptionRaceFreeWithALaneGivenToANewID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var describing atomic.Bool
		handle := func(_ context.Context, x slowID) error {
			switch x.id {
			case "x":
				time.Sleep(500 * time.Millisecond)
			case "y":
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}
		src := emitFunc[slowID](func(ctx context.Context, emit func(slowID) error) error {
			for _, id := range []string{"x", "y"} {
				if err := emit(slowID{id, &describing}); err != nil {
					return err
				}
			}
			<-ctx.Done() // the stop began
			time.Sleep(200 * time.Millisecond)
			return emit(slowID{"z", &describing}) // handed on: the lanes of x and y were made first, y's is idle
		})
		d := started(t, dispatch.Source[slowID](src), handle,
			dispatch.WithKeyOrdering(), dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait() // x and y run, the source waits for the stop
		describing.Store(true)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "handlers running in groups", "the description names the running groups")
		<-d.Done()
		require.NoError(t, d.Err())
		assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, d.Stats())
		assert.Equal(t, 2, dispatch.KeyLanes(d), "z took y's lane")
	})
}
