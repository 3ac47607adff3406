package dispatch_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// emitInBatches emits xs with EmitBatch, cut into batches of the sizes
// given in turn, and checks that each batch is taken whole.
func emitInBatches(ctx context.Context, d *dispatch.Dispatcher[testkit.Exchange], xs []testkit.Exchange, sizes []int) error {
	for i := 0; len(xs) > 0; i++ {
		b := xs[:min(sizes[i%len(sizes)], len(xs))]
		n, err := d.EmitBatch(ctx, b)
		if err != nil {
			return err
		}
		if n != len(b) {
			return errors.New("EmitBatch took part of a batch without an error")
		}
		xs = xs[len(b):]
	}
	return nil
}

// Producers push batches of random sizes at once, beside one that pushes
// with Emit, into a budget small enough that runs wait for room mid-batch:
// nothing is lost or handled twice, each id keeps the order its producer
// pushed it in, each group (each id under WithKeyOrdering) runs serially,
// on a pool and on Immediate (where the handlers run in EmitBatch).
func TestEmitBatchKeepsOrderWithoutLoss(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		producers := rapid.IntRange(1, 4).Draw(rt, "producers")
		n := rapid.IntRange(1, 600).Draw(rt, "n")
		ids := rapid.IntRange(1, 40).Draw(rt, "ids")
		p := rapid.SampledFrom([]int{1, 3, 16}).Draw(rt, "parallelism")
		pending := rapid.SampledFrom([]int{1, 7, 64, 4096}).Draw(rt, "maxPending")
		sizes := rapid.SliceOfN(rapid.IntRange(1, 600), 1, 5).Draw(rt, "sizes")
		perKey := rapid.Bool().Draw(rt, "perKey")
		immediate := rapid.Bool().Draw(rt, "immediate")

		sched := schedulers.Immediate()
		if !immediate {
			var err error
			sched, err = schedulers.NewParallel("batch", 2)
			require.NoError(rt, err)
			defer func() { assert.NoError(rt, sched.DisposeGracefully(context.Background())) }()
		}
		tag := func(x testkit.Exchange) testkit.Tag { return x.Tag(p) }
		opts := []dispatch.Option[testkit.Exchange]{quiet, dispatch.WithParallelism(p),
			dispatch.WithMaxPending(pending), dispatch.WithScheduler(sched)}
		if perKey {
			var mu sync.Mutex
			serial := map[string]int{} // each id its own "group": serial on its own
			tag = func(x testkit.Exchange) testkit.Tag {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := serial[x.ID.ID]; !ok {
					serial[x.ID.ID] = len(serial)
				}
				return testkit.Tag{Key: x.ID.ID, Seq: x.Seq, Group: serial[x.ID.ID]}
			}
			opts = append(opts, dispatch.WithKeyOrdering())
		}
		rec := testkit.NewRecorder(tag, testkit.Perform)
		d, err := dispatch.New("orders", orders, nil, rec.Handle, opts...)
		require.NoError(rt, err)
		require.NoError(rt, d.Prepare(context.Background()))
		require.NoError(rt, d.Start())
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() {
				assert.NoError(rt, emitInBatches(context.Background(), d, producerExchanges(i, n, ids), sizes))
			})
		}
		wg.Go(func() { assert.NoError(rt, emitAll(context.Background(), d, producerExchanges(producers, n, ids))) })
		wg.Wait()
		require.NoError(rt, d.StopGracefully(context.Background()))
		calls := rec.Calls()
		total := (producers + 1) * n
		assert.NoError(rt, testkit.PerKeyFIFO(calls))
		assert.NoError(rt, testkit.GroupSerial(calls))
		assert.NoError(rt, testkit.NoLoss(int64(total), d.Stats(), calls))
		assert.Equal(rt, dispatch.Stats{Received: int64(total), Succeeded: int64(total)}, d.Stats())
	})
}

// With the budget used up by a blocked handler, EmitBatch takes what room
// there is, then waits; when its ctx ends it returns how many it took and
// ctx's cause, and the rest is not counted: the caller keeps it.
func TestEmitBatchBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var handled atomic.Int64
		d := started(t, nil, func(context.Context, testkit.Exchange) error {
			if handled.Add(1) == 1 {
				<-release
			}
			return nil
		}, dispatch.WithMaxPending(4))
		xs := exchanges(10, 1) // one id: the first handler holds the others back

		waitCause := errors.New("the producer gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := d.EmitBatch(ctx, xs)
			done <- result{n, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("EmitBatch returned %d, %v while the budget is used up", r.n, r.err)
		default:
		}
		assert.Equal(t, dispatch.Stats{Received: 4, InFlight: 4}, d.Stats(), "the room there was is taken")
		cancel(waitCause)
		r := <-done
		assert.Equal(t, 4, r.n)
		assert.ErrorIs(t, r.err, waitCause, "EmitBatch returns ctx's cause")
		assert.Equal(t, dispatch.Stats{Received: 4, InFlight: 4}, d.Stats(), "the rest is not counted")

		close(release)
		n, err := d.EmitBatch(t.Context(), xs[r.n:])
		require.NoError(t, err)
		assert.Equal(t, 6, n)
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: 10, Succeeded: 10}, d.Stats())
		pending, _ := d.Budget()
		assert.Zero(t, pending)
	})
}

// A stop while EmitBatch waits for room ends the wait: it returns how many
// it took and ErrStopped, and what it took still ends (drained, or
// discarded by the force).
func TestEmitBatchWaitingIsReleasedByAStop(t *testing.T) {
	for _, force := range []bool{false, true} {
		name := "Quiesce"
		if force {
			name = "ForceStop"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				d := started(t, nil, func(ctx context.Context, x testkit.Exchange) error {
					if x.Seq == 0 {
						select {
						case <-release:
						case <-ctx.Done():
						}
					}
					return nil
				}, dispatch.WithMaxPending(2))
				errc := make(chan error, 1)
				var n int
				go func() {
					var err error
					n, err = d.EmitBatch(t.Context(), exchanges(5, 1))
					errc <- err
				}()
				synctest.Wait()
				if force {
					d.ForceStop()
				} else {
					d.Quiesce()
				}
				assert.ErrorIs(t, <-errc, dispatch.ErrStopped)
				assert.Equal(t, 2, n)
				close(release)
				<-d.Done()
				s := d.Stats()
				assert.EqualValues(t, 2, s.Received)
				assert.Zero(t, s.InFlight)
				if !force {
					assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, s)
				}
			})
		})
	}
}

// EmitBatch before Start and after a stop returns ErrStopped and counts
// nothing; on a dispatcher with a source it is refused; an empty batch
// takes nothing.
func TestEmitBatchOutsideRunning(t *testing.T) {
	xs := exchanges(3, 2)
	d, err := dispatch.New("orders", orders, nil, testkit.Perform, quiet)
	require.NoError(t, err)
	n, err := d.EmitBatch(t.Context(), xs)
	assert.ErrorIs(t, err, dispatch.ErrStopped, "before Prepare")
	assert.Zero(t, n)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	n, err = d.EmitBatch(t.Context(), nil)
	assert.NoError(t, err)
	assert.Zero(t, n)
	n, err = d.EmitBatch(t.Context(), xs)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	require.NoError(t, d.StopGracefully(t.Context()))
	n, err = d.EmitBatch(t.Context(), xs)
	assert.ErrorIs(t, err, dispatch.ErrStopped, "after a graceful stop")
	assert.ErrorContains(t, err, `dispatcher "orders"`)
	assert.Zero(t, n)
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, d.Stats())

	s := started(t, flux.FromSlice(exchanges(3, 1)), testkit.Perform)
	_, err = s.EmitBatch(t.Context(), xs)
	assert.ErrorIs(t, err, dispatch.ErrIllegalState, "a dispatcher with a source")
	assert.ErrorContains(t, err, "EmitBatch is for a nil source")
	<-s.Done()
}

// Exchanges of a batch that cannot be routed (a key out of range, a key
// function that panics, an aggregate a MainDispatcher does not know) are
// taken, counted and fail (or are discarded) alone; the rest is admitted.
func TestEmitBatchUnroutable(t *testing.T) {
	obs := &countingObserver{}
	d := startedKeyed(t, nil, func(i int) int {
		if i == 1 {
			panic("bad key")
		}
		return i
	}, func(context.Context, int) error { return nil }, dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	n, err := d.EmitBatch(t.Context(), []int{0, -1, 1, 3, 4, 2})
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	require.NoError(t, d.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 6, Succeeded: 3, Failed: 3}, d.Stats())
	assert.True(t, every(obs.errs, dispatch.ErrInvalidGroupKey))
	var pe *dispatch.PanicError
	assert.True(t, slicesAny(obs.errs, func(err error) bool { return errors.As(err, &pe) }), "the key function's panic is an error")
	pending, _ := d.Budget()
	assert.Zero(t, pending, "the unrouted exchanges gave their units back")

	sup, _ := countingSupplier(t)
	m := newMain(t, nil, testkit.Perform, sup, quiet)
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	n, err = m.EmitBatch(t.Context(), mixed(30, 3, orders, invoices, payments))
	require.NoError(t, err)
	assert.Equal(t, 30, n)
	require.NoError(t, m.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 30, Succeeded: 20, Discarded: 10}, m.Stats())
}

func slicesAny(errs []error, f func(error) bool) bool {
	for _, err := range errs {
		if f(err) {
			return true
		}
	}
	return false
}

// User code on EmitBatch's way that ends the goroutine with runtime.Goexit
// (an Observer's Admitted, AggregateID) ends it as Emit calls one at a time
// would end: the exchanges before are admitted (those of its run too), the
// rest gives its units back, and the dispatcher still stops gracefully.
func TestEmitBatchGoexitLeavesTheDispatcherStoppable(t *testing.T) {
	t.Run("Admitted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			obs := &goexitOnAdmitted{countingObserver: &countingObserver{}, n: 302} // in the second run
			d := started(t, nil, testkit.Perform, dispatch.WithObserver(obs))
			goexitInEmitBatch(t, d, exchanges(400, 7), 301)
		})
	})
	t.Run("AggregateID", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			xs := make([]goexitID, 300)
			for i := range xs {
				xs[i] = goexitID{aggregate.NewID(orders, "a")}
			}
			xs[280].id.ID = "exit" // in the second run
			d := started(t, nil, func(context.Context, goexitID) error { return nil }, quietOf[goexitID]())
			goexitInEmitBatch(t, d, xs, 280)
		})
	})
}

// emitBatchExits calls d.EmitBatch(xs) on a goroutine of its own and
// reports whether the call ended the goroutine (runtime.Goexit) rather than
// returning.
func emitBatchExits[T any](d *dispatch.Dispatcher[T], xs []T) bool {
	returned := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { returned <- ok }()
		_, _ = d.EmitBatch(context.Background(), xs)
		ok = true
	}()
	return !<-returned
}

// goexitInEmitBatch pushes xs, whose user code ends EmitBatch's goroutine
// in the second run, at exchange before, and checks that the exchanges
// before it only were counted and that d stops gracefully with no unit held.
func goexitInEmitBatch[T any](t *testing.T, d *dispatch.Dispatcher[T], xs []T, before int) {
	assert.True(t, emitBatchExits(d, xs), "EmitBatch's goroutine ended with Goexit")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.StopGracefully(ctx); err != nil {
		t.Errorf("StopGracefully after an EmitBatch ended with Goexit: %v (%+v)", err, d.Stats())
		d.ForceStop()
		if !edgeWaitDone(t, d, "after ForceStop") {
			t.Fatalf("an EmitBatch ended with Goexit holds the dispatcher for ever: %+v", d.Stats())
		}
	}
	n := int64(before)
	assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats(), "the exchanges before were admitted, the rest not")
	pending, _ := d.Budget()
	assert.Zero(t, pending, "the run cut short gave its budget units back")
}

// On Immediate the handlers run inside EmitBatch: one that ends the
// goroutine with runtime.Goexit fails its exchange, and the other groups
// the run made ready are still scheduled (handled) as the goroutine
// unwinds.
func TestEmitBatchOnImmediateSchedulesTheRestAfterAGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(12, 12) // 12 ids over 16 groups: several groups touched
		var handled sync.Map
		d := started(t, nil, func(_ context.Context, x testkit.Exchange) error {
			handled.Store(x.ID.ID, true)
			if x.ID.ID == xs[0].ID.ID {
				runtime.Goexit()
			}
			return nil
		}, dispatch.WithScheduler(schedulers.Immediate()), dispatch.WithParallelism(16))
		assert.True(t, emitBatchExits(d, xs), "the handler's Goexit ended EmitBatch's goroutine")
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: 12, Succeeded: 11, Failed: 1}, d.Stats())
		for _, x := range xs {
			_, ok := handled.Load(x.ID.ID)
			assert.True(t, ok, "%s handled", x.ID.ID)
		}
	})
}

// panicOnAdmitted is an Observer whose Admitted panics at its nth call.
type panicOnAdmitted struct {
	*countingObserver
	n, calls int64 // only EmitBatch's goroutine calls Admitted here
}

func (o *panicOnAdmitted) Admitted(ctx context.Context, l dispatch.Labels) {
	o.calls++
	if o.calls == o.n {
		panic("observer")
	}
	o.countingObserver.Admitted(ctx, l)
}

// An Observer whose Admitted panics mid-batch does not end EmitBatch: the
// panic is recovered (the observer is guarded) and the whole batch is
// admitted, on a pool and on Immediate.
func TestEmitBatchObserverPanicIsRecovered(t *testing.T) {
	for _, immediate := range []bool{false, true} {
		obs := &panicOnAdmitted{countingObserver: &countingObserver{}, n: 300} // in the second run
		opts := []dispatch.Option[testkit.Exchange]{dispatch.WithObserver(obs)}
		if immediate {
			opts = append(opts, dispatch.WithScheduler(schedulers.Immediate()))
		}
		d := started(t, nil, testkit.Perform, opts...)
		n, err := d.EmitBatch(t.Context(), exchanges(400, 7))
		require.NoError(t, err)
		assert.Equal(t, 400, n)
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: 400, Succeeded: 400}, d.Stats())
		assert.EqualValues(t, 399, obs.admitted.Load(), "every other Admitted ran")
		pending, _ := d.Budget()
		assert.Zero(t, pending)
	}
}

// On Immediate a handler that calls EmitBatch and Emit on its own
// dispatcher runs inside the outer EmitBatch: no lock is held there, so it
// does not deadlock, and what it pushes is handled too, by group and by
// key.
func TestEmitBatchFromAHandlerOnImmediate(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		var d *dispatch.Dispatcher[testkit.Exchange]
		h := func(ctx context.Context, x testkit.Exchange) error {
			if x.Seq < 3 { // the outer batch's first three of each id push three more each
				n, err := d.EmitBatch(ctx, []testkit.Exchange{{ID: x.ID, Seq: x.Seq + 10}, {ID: aggregate.NewID(orders, "other"), Seq: 10}})
				assert.NoError(t, err)
				assert.Equal(t, 2, n)
				assert.NoError(t, d.Emit(ctx, testkit.Exchange{ID: x.ID, Seq: 100}))
			}
			return nil
		}
		opts := []dispatch.Option[testkit.Exchange]{dispatch.WithScheduler(schedulers.Immediate()), dispatch.WithParallelism(2)}
		if keyed {
			opts = append(opts, dispatch.WithKeyOrdering())
		}
		d = started(t, nil, h, opts...)
		n, err := d.EmitBatch(t.Context(), exchanges(300, 7))
		require.NoError(t, err)
		require.Equal(t, 300, n)
		require.NoError(t, d.StopGracefully(t.Context()))
		const total = 300 + 7*3*3
		assert.Equal(t, dispatch.Stats{Received: total, Succeeded: total}, d.Stats())
	}
}

// Once Done is closed no exchange is admitted and not finished, so the
// pending budget is 0: producers pushing with EmitBatch and Emit, stopped
// gracefully or by force mid-push, on a pool.
func TestEmitBatchBudgetIsZeroOnceDone(t *testing.T) {
	for iter := range 200 {
		force := iter%2 == 0
		d := started(t, nil, testkit.Perform, dispatch.WithScheduler(newParallel(t, 2)),
			dispatch.WithParallelism(4), dispatch.WithMaxPending(1+iter%7))
		var wg sync.WaitGroup
		for p := range 3 {
			wg.Go(func() {
				xs := producerExchanges(p, 2000, 5+p)
				for len(xs) > 0 {
					n, err := d.EmitBatch(context.Background(), xs[:min(len(xs), 1+p*100)])
					if err != nil {
						return
					}
					xs = xs[n:]
				}
			})
		}
		wg.Go(func() { _ = emitAll(context.Background(), d, producerExchanges(9, 500, 3)) })
		for d.Stats().Received < int64(iter%10*300) { // stop at varied points of the push
			runtime.Gosched()
		}
		if force {
			d.ForceStop()
		} else {
			require.NoError(t, d.StopGracefully(t.Context()))
		}
		wg.Wait()
		<-d.Done()
		pending, _ := d.Budget()
		require.Zero(t, pending, "run %d: units pending once Done is closed (%+v)", iter, d.Stats())
	}
}

// refusingBatcher is a pool whose ScheduleAll refuses, as a scheduler
// disposed between a batch's publication and its kick does.
type refusingBatcher struct{ *schedulers.Parallel }

func (refusingBatcher) ScheduleAll([]schedulers.Task) error {
	return errors.New("schedulers: refused for the test: " + schedulers.ErrRejected.Error())
}

// A run of lanes whose kick the scheduler's ScheduleAll refuses is handled
// as a refused Schedule is, for each lane of the run: the named aggregate
// retires with the refusal as the dispatcher's error, and every exchange
// of the batch is accounted for, discarded, none handled.
func TestEmitBatchKickRefusedByABatcherDiscardsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool, err := schedulers.NewParallel("refusing", 2)
		require.NoError(t, err)
		defer func() { assert.NoError(t, pool.DisposeGracefully(context.Background())) }()
		var handled atomic.Int64
		d := started(t, nil, func(context.Context, testkit.Exchange) error { handled.Add(1); return nil },
			dispatch.WithScheduler(refusingBatcher{pool}), dispatch.WithParallelism(16))
		xs := exchanges(64, 16) // 16 ids over 16 groups: a run of many lanes
		n, err := d.EmitBatch(t.Context(), xs)
		require.NoError(t, err)
		require.Equal(t, len(xs), n)
		<-d.Done()
		require.ErrorContains(t, d.Err(), "scheduler refused work")
		require.ErrorContains(t, d.Err(), "refused for the test")
		assert.Zero(t, handled.Load())
		assert.Equal(t, dispatch.Stats{Received: 64, Discarded: 64}, d.Stats())
	})
}
