package aggregate_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

var (
	invoice = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Invoice"}
	// billingOrder has the aggregate name of order in another context.
	billingOrder = aggregate.MaterializedNamedAggregate{Context: "billing", Aggregate: "Order"}
)

func newSupplier(t *testing.T, r *recorder, opts ...aggregate.Option) *aggregate.Supplier {
	t.Helper()
	s, err := aggregate.NewSchedulerSupplier("worker", append([]aggregate.Option{aggregate.WithSchedulerFactory(r.factory)}, opts...)...)
	require.NoError(t, err)
	return s
}

func get(t *testing.T, s aggregate.SchedulerSupplier, n aggregate.NamedAggregate) schedulers.Scheduler {
	t.Helper()
	sch, err := s.GetOrInitialize(n)
	require.NoError(t, err)
	return sch
}

func TestNewSchedulerSupplierValidates(t *testing.T) {
	_, err := aggregate.NewSchedulerSupplier("")
	assert.ErrorIs(t, err, aggregate.ErrInvalidName)
	for _, n := range []int{0, -1} {
		_, err = aggregate.NewSchedulerSupplier("worker", aggregate.WithParallelism(n))
		assert.ErrorIs(t, err, aggregate.ErrInvalidParallelism)
		assert.True(t, strings.HasPrefix(err.Error(), "aggregate: "), err.Error())
	}
}

func TestSupplierPassesNameAndParallelism(t *testing.T) {
	r := fakes()
	get(t, newSupplier(t, r, aggregate.WithParallelism(3)), order)
	get(t, newSupplier(t, r), order)
	assert.Equal(t, []string{"worker-Order", "worker-Order"}, r.names)
	assert.Equal(t, []int{3, schedulers.DefaultPoolSize}, r.sizes)
}

func TestSupplierCachesByMaterializedNamedAggregate(t *testing.T) {
	r := fakes()
	s := newSupplier(t, r)
	first := get(t, s, order)
	same, err := aggregate.ParseNamedAggregate("sales.Order", "ignored-context")
	require.NoError(t, err)
	for _, n := range []aggregate.NamedAggregate{same, &message{ctx: "sales", agg: "Order", body: "b"},
		aggregate.NewID(order, "o-1"), wrapped{aggregate.NewID(order, "o-2")}} {
		assert.Same(t, first, get(t, s, n))
	}
	assert.NotSame(t, first, get(t, s, invoice))
	assert.Equal(t, 2, r.count())
}

func TestSupplierSameAggregateNameInTwoContexts(t *testing.T) {
	r := fakes()
	s := newSupplier(t, r)
	a, b := get(t, s, order), get(t, s, billingOrder)
	assert.NotSame(t, a, b)
	assert.Equal(t, "worker-Order", a.Name())
	assert.Equal(t, "worker-Order", b.Name())
}

// Wow's SUP-05 checks the thread name; here the scheduler's name labels the
// goroutines that run its tasks.
func TestSupplierSchedulerNameLabelsTasks(t *testing.T) {
	s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
	label := make(chan string, 1)
	require.NoError(t, get(t, s, order).Schedule(func(ctx context.Context) {
		v, _ := pprof.Label(ctx, "scheduler")
		label <- v
	}))
	assert.Equal(t, "worker-Order", <-label)
	require.NoError(t, s.StopGracefully(context.Background()))
}

func TestSupplierCreatesOneSchedulerUnderConcurrentAccess(t *testing.T) {
	r := fakes()
	s := newSupplier(t, r)
	got := make([]schedulers.Scheduler, 64)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			<-start
			got[i], _ = s.GetOrInitialize(order)
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, 1, r.count())
	for _, sch := range got {
		assert.Same(t, r.all()[0], sch)
	}
}

func TestSupplierConcurrentDifferentAggregates(t *testing.T) {
	r := fakes()
	s := newSupplier(t, r)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			get(t, s, aggregate.MaterializedNamedAggregate{Context: "test", Aggregate: "A" + strconv.Itoa(i)})
		})
	}
	wg.Wait()
	assert.Equal(t, 50, r.count())
}

func TestSupplierFactoryFailureCachesNothing(t *testing.T) {
	r := fakes()
	s := newSupplier(t, r)
	r.setFail(errBoom)
	_, err := s.GetOrInitialize(order)
	assert.ErrorIs(t, err, errBoom)
	assert.Contains(t, err.Error(), `"worker-Order"`)
	r.setFail(nil)
	get(t, s, order)
	assert.Equal(t, 1, r.count())
}

func TestSupplierFactoryPanicAndNil(t *testing.T) {
	calls := 0
	s, err := aggregate.NewSchedulerSupplier("worker", aggregate.WithSchedulerFactory(
		func(string, int) (schedulers.Scheduler, error) {
			calls++
			if calls == 1 {
				panic(errBoom)
			}
			return nil, nil
		}))
	require.NoError(t, err)
	_, err = s.GetOrInitialize(order)
	var pe *aggregate.PanicError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, errBoom)
	// The lock was released: the next call reaches the factory again.
	_, err = s.GetOrInitialize(order)
	assert.ErrorContains(t, err, "nil scheduler")
	assert.Equal(t, 2, calls)
}

func TestSupplierRejectsNilNamedAggregate(t *testing.T) {
	_, err := newSupplier(t, fakes()).GetOrInitialize(nil)
	assert.ErrorIs(t, err, aggregate.ErrInvalidNamedAggregate)
}

// Each stop closes creation, disposes what was handed out, and repeats.
func TestSupplierStopRejectsAndDisposes(t *testing.T) {
	stops := map[string]func(*aggregate.Supplier) error{
		"graceful": func(s *aggregate.Supplier) error { return s.StopGracefully(context.Background()) },
		"force":    func(s *aggregate.Supplier) error { s.ForceStop(); return nil },
	}
	for name, stop := range stops {
		t.Run(name, func(t *testing.T) {
			r := parallels()
			s := newSupplier(t, r, aggregate.WithParallelism(1))
			sch := get(t, s, order)
			require.NoError(t, stop(s))
			assert.True(t, sch.IsDisposed())
			<-sch.Done()
			for _, n := range []aggregate.NamedAggregate{order, invoice} {
				_, err := s.GetOrInitialize(n)
				assert.ErrorIs(t, err, aggregate.ErrStopped)
				assert.Contains(t, err.Error(), `"worker"`)
			}
			for _, again := range stops {
				assert.NoError(t, again(s))
			}
			<-s.Done()
			assert.NoError(t, s.Err())
			assert.Equal(t, 1, r.count())
		})
	}
}

func TestStopGracefullyDrainsQueuedTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		w, err := get(t, s, order).NewWorker()
		require.NoError(t, err)
		release := make(chan struct{})
		var ran []int
		for i := range 5 {
			require.NoError(t, w.Schedule(func(context.Context) {
				if i == 0 {
					<-release
				}
				ran = append(ran, i)
			}))
		}
		stopped := make(chan error)
		go func() { stopped <- s.StopGracefully(context.Background()) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("StopGracefully returned while a task was running")
		default:
		}
		close(release)
		assert.NoError(t, <-stopped)
		assert.Equal(t, []int{0, 1, 2, 3, 4}, ran)
	})
}

// Wow's SUP-07: the disposal started by a call whose wait nobody observes
// still completes, and later callers see its result.
func TestStopGracefullyDeadlineThenLaterCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		sch := get(t, s, order)
		release := make(chan struct{})
		finished := make(chan struct{})
		require.NoError(t, sch.Schedule(func(ctx context.Context) {
			<-release
			close(finished)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		began := time.Now()
		assert.ErrorIs(t, s.StopGracefully(ctx), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(began))
		assert.True(t, sch.IsDisposed())
		_, err := s.GetOrInitialize(order)
		assert.ErrorIs(t, err, aggregate.ErrStopped)

		cancelled, cancelNow := context.WithCancel(context.Background())
		cancelNow()
		assert.ErrorIs(t, s.StopGracefully(cancelled), context.Canceled)

		close(release)
		assert.NoError(t, s.StopGracefully(context.Background()))
		<-finished // the task ran to its end: it was not cut short
		assert.NoError(t, s.StopGracefully(cancelled), "a finished disposal is reported even to a cancelled caller")
	})
}

// Wow's SUP-08 and the benchmark supplier's "force stop takes over shared
// graceful termination": every graceful waiter returns, the running task's
// context is cancelled.
func TestForceStopTakesOverGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		sch := get(t, s, order)
		cause := make(chan error, 1)
		require.NoError(t, sch.Schedule(func(ctx context.Context) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
		}))
		waiters := make(chan error, 3)
		for range 3 {
			go func() { waiters <- s.StopGracefully(context.Background()) }()
		}
		synctest.Wait()
		assert.Empty(t, waiters, "graceful waiters returned while a task was running")
		s.ForceStop()
		for range 3 {
			assert.NoError(t, <-waiters)
		}
		assert.ErrorIs(t, <-cause, schedulers.ErrDisposed)
		s.ForceStop()
		assert.NoError(t, s.StopGracefully(context.Background()))
	})
}

func TestStopGracefullyAfterForceStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(2))
		sch := get(t, s, order)
		exited := make(chan struct{})
		require.NoError(t, sch.Schedule(func(ctx context.Context) {
			<-ctx.Done()
			close(exited)
		}))
		synctest.Wait()
		s.ForceStop()
		assert.NoError(t, s.StopGracefully(context.Background()))
		select {
		case <-sch.Done():
		default:
			t.Fatal("StopGracefully returned before the scheduler's goroutines exited")
		}
		<-exited
	})
}

func TestStopGracefullyReportsDisposalErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := fakes()
		s := newSupplier(t, r)
		failing, panicking, fine := get(t, s, order).(*fakeScheduler), get(t, s, invoice).(*fakeScheduler), get(t, s, billingOrder).(*fakeScheduler)
		failing.graceErr = errBoom
		panicking.gracePanic = "kaput"
		failing.finish()
		fine.finish()
		err := s.StopGracefully(context.Background())
		assert.ErrorIs(t, err, errBoom)
		var pe *aggregate.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "kaput", pe.Value)
		assert.True(t, strings.HasPrefix(err.Error(), "aggregate: "), err.Error())
		assert.Equal(t, err, s.StopGracefully(context.Background()), "every caller observes the same result")
		assert.Equal(t, err, s.Err())
		assert.True(t, fine.IsDisposed())
		assert.False(t, fine.forced.Load())
	})
}

func TestForceStopSurvivesPanickingDispose(t *testing.T) {
	var logs bytes.Buffer
	r := fakes()
	s := newSupplier(t, r, aggregate.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	first, second := get(t, s, order).(*fakeScheduler), get(t, s, invoice).(*fakeScheduler)
	first.disposePan = "kaput"
	s.ForceStop()
	assert.True(t, second.forced.Load())
	assert.Contains(t, logs.String(), "kaput")
	assert.Contains(t, logs.String(), "supplier=worker")
	<-s.Done()
	var pe *aggregate.PanicError
	require.ErrorAs(t, s.Err(), &pe, "the panic is joined into Err")
	assert.Equal(t, "kaput", pe.Value)
	assert.ErrorContains(t, s.Err(), `"worker-Order"`)
}

// Every GetOrInitialize racing a stop either returns a scheduler that the stop
// disposes, or ErrStopped; at most one scheduler is created per materialized
// key, and every scheduler created is disposed.
func TestStopRacingGetOrInitialize(t *testing.T) {
	keys := []aggregate.NamedAggregate{order, invoice, billingOrder, wrapped{aggregate.NewID(invoice, "i")}}
	rapid.Check(t, func(rt *rapid.T) {
		goroutines := rapid.IntRange(1, 16).Draw(rt, "goroutines")
		calls := rapid.IntRange(1, 40).Draw(rt, "calls")
		stopAfter := rapid.IntRange(0, calls).Draw(rt, "stopAfter")
		kind := rapid.SampledFrom([]string{"graceful", "force", "graceful+force", "force+graceful"}).Draw(rt, "kind")
		r := parallels()
		s := newSupplier(t, r, aggregate.WithParallelism(1))
		trigger := make(chan struct{})
		results := make([][]schedulers.Scheduler, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range calls {
					if g == 0 && i == stopAfter {
						close(trigger)
					}
					sch, err := s.GetOrInitialize(keys[(g+i)%len(keys)])
					if err != nil {
						assert.ErrorIs(rt, err, aggregate.ErrStopped)
						continue
					}
					results[g] = append(results[g], sch)
				}
				if g == 0 && stopAfter == calls {
					close(trigger)
				}
			})
		}
		<-trigger
		for _, step := range strings.Split(kind, "+") {
			if step == "force" {
				wg.Go(s.ForceStop)
			} else {
				wg.Go(func() { assert.NoError(rt, s.StopGracefully(context.Background())) })
			}
		}
		wg.Wait()
		require.NoError(rt, s.StopGracefully(context.Background()))
		_, err := s.GetOrInitialize(order)
		require.ErrorIs(rt, err, aggregate.ErrStopped)
		require.LessOrEqual(rt, r.count(), 3)
		created := map[schedulers.Scheduler]bool{}
		for _, sch := range r.all() {
			created[sch] = true
		}
		for _, handed := range results {
			for _, sch := range handed {
				require.True(rt, created[sch], "a scheduler handed out was not created by the factory")
			}
		}
		for sch := range created {
			require.True(rt, sch.IsDisposed(), sch.Name())
			<-sch.Done()
		}
	})
}

// gate is a factory that blocks in its creation of one scheduler name until
// released, and creates fakes.
type gate struct {
	name     string
	entered  chan struct{}
	release  chan struct{}
	made     *fakeScheduler
	failWith error
}

func newGate(name string) *gate {
	return &gate{name: name, entered: make(chan struct{}), release: make(chan struct{}), made: newFake(name)}
}

func (g *gate) factory(name string, _ int) (schedulers.Scheduler, error) {
	if name != g.name {
		return newFake(name), nil
	}
	close(g.entered)
	<-g.release
	if g.failWith != nil {
		return nil, g.failWith
	}
	return g.made, nil
}

// creating returns a supplier whose factory blocks in the creation of
// "worker-Order", which a GetOrInitialize of order has entered; creator
// receives that call's error.
func creating(t *testing.T, failWith error) (g *gate, s *aggregate.Supplier, creator <-chan error) {
	t.Helper()
	g = newGate("worker-Order")
	g.failWith = failWith
	s, err := aggregate.NewSchedulerSupplier("worker", aggregate.WithSchedulerFactory(g.factory))
	require.NoError(t, err)
	creator = getAsync(s, order)
	<-g.entered
	return g, s, creator
}

// getAsync calls GetOrInitialize on a goroutine of its own.
func getAsync(s *aggregate.Supplier, n aggregate.NamedAggregate) <-chan error {
	got := make(chan error, 1)
	go func() {
		_, err := s.GetOrInitialize(n)
		got <- err
	}()
	return got
}

// The factory runs outside the supplier's lock: ForceStop returns while it
// blocks, a caller waiting for the same creation gets ErrStopped at once,
// and the creator gets it when the factory returns, with what it made
// disposed. Done waits for the factory.
func TestForceStopDuringCreationReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		waiter := getAsync(s, order)
		synctest.Wait() // the waiter waits for the creation

		s.ForceStop()
		assert.ErrorIs(t, <-waiter, aggregate.ErrStopped)
		synctest.Wait()
		assert.False(t, testkit.Closed(s.Done()), "Done closed while the factory runs")

		close(g.release)
		assert.ErrorIs(t, <-creator, aggregate.ErrStopped)
		<-s.Done()
		assert.True(t, g.made.forced.Load(), "what the factory made after the stop is disposed")
		assert.NoError(t, s.Err())
	})
}

func TestGracefulStopDuringCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, s.StopGracefully(ctx), context.DeadlineExceeded, "the stop waits for the factory")
		close(g.release)
		assert.ErrorIs(t, <-creator, aggregate.ErrStopped)
		assert.NoError(t, s.StopGracefully(context.Background()))
		assert.True(t, g.made.IsDisposed())
	})
}

// Callers for one named aggregate wait for the creation in progress, on a
// channel; callers for another one are served meanwhile.
func TestCreationDoesNotBlockOtherAggregates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		waiter := make(chan schedulers.Scheduler, 1)
		go func() {
			sch, _ := s.GetOrInitialize(order)
			waiter <- sch
		}()
		_, err := s.GetOrInitialize(invoice)
		assert.NoError(t, err)
		synctest.Wait()
		assert.Empty(t, waiter)
		close(g.release)
		assert.NoError(t, <-creator)
		assert.Same(t, g.made, <-waiter, "one creation, shared")
		s.ForceStop()
		<-s.Done()
	})
}

// A failed creation is reported to its waiters too, and the next call tries
// again.
func TestFailedCreationIsSharedThenRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, errBoom)
		waiter := getAsync(s, order)
		synctest.Wait()
		close(g.release)
		assert.ErrorIs(t, <-creator, errBoom)
		assert.ErrorIs(t, <-waiter, errBoom)
		g.entered, g.failWith = make(chan struct{}), nil
		assert.Same(t, g.made, get(t, s, order))
		g.made.finish()
		require.NoError(t, s.StopGracefully(context.Background()))
	})
}

// The supplier's logger reaches the schedulers the default factory creates.
func TestDefaultFactoryLogsThroughSupplierLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		s, err := aggregate.NewSchedulerSupplier("worker", aggregate.WithParallelism(1),
			aggregate.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		require.NoError(t, err)
		require.NoError(t, get(t, s, order).Schedule(func(context.Context) { panic("kaput") }))
		require.NoError(t, s.StopGracefully(context.Background()))
		assert.Contains(t, logs.String(), "kaput")
		assert.Contains(t, logs.String(), "worker-Order")
	})
}

// Done closes only after a stop, once every scheduler's goroutines exited:
// after a force, that waits for a task that ignores its context.
func TestSupplierDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		release := make(chan struct{})
		require.NoError(t, get(t, s, order).Schedule(func(context.Context) { <-release }))
		synctest.Wait()
		assert.False(t, testkit.Closed(s.Done()), "no stop yet")
		assert.Equal(t, "worker", s.Name())
		s.ForceStop()
		synctest.Wait()
		assert.False(t, testkit.Closed(s.Done()), "a task still runs")
		close(release)
		<-s.Done()
		assert.NoError(t, s.Err())
	})
	empty := newSupplier(t, fakes())
	require.NoError(t, empty.StopGracefully(context.Background()))
	assert.True(t, testkit.Closed(empty.Done()))
}

// A borrower sees only GetOrInitialize: it cannot stop what it was lent.
// Stopping the owner stops what the borrowers were handed (Wow's BSUP-01).
func TestLentSupplierCannotStop(t *testing.T) {
	owner := newSupplier(t, parallels())
	var events, states aggregate.SchedulerSupplier = owner, owner
	sch := get(t, events, order)
	assert.Same(t, sch, get(t, states, order))
	_, canStop := events.(interface{ ForceStop() })
	assert.True(t, canStop, "the dynamic type is the owner's")
	require.NoError(t, owner.StopGracefully(context.Background()))
	assert.True(t, sch.IsDisposed())
	_, err := states.GetOrInitialize(order)
	assert.ErrorIs(t, err, aggregate.ErrStopped)
}
