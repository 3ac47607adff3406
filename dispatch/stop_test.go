package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// gatedSupplier is a supplier whose GetOrInitialize signals entered and
// then waits until release is closed (or runs wait, when set, instead);
// it hands out Immediate. Its stops do nothing: the test owns nothing of it.
type gatedSupplier struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	wait    func()
}

func newGatedSupplier() *gatedSupplier {
	return &gatedSupplier{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *gatedSupplier) GetOrInitialize(aggregate.NamedAggregate) (schedulers.Scheduler, error) {
	s.once.Do(func() { close(s.entered) })
	if s.wait != nil {
		s.wait()
	} else {
		<-s.release
	}
	return schedulers.Immediate(), nil
}

func (s *gatedSupplier) StopGracefully(context.Context) error { return nil }
func (s *gatedSupplier) ForceStop()                           {}

// ForceStop does not wait for a Prepare that waits in the supplier: it
// returns at once, the dispatcher is stopped (the logical end), Done waits
// for Prepare to return, and Prepare then reports the stop.
func TestForceStopWhilePrepareWaitsInTheSupplier(t *testing.T) {
	for _, kind := range []string{"dispatcher", "main dispatcher"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sup := newGatedSupplier()
				var c interface {
					component.Component
					State() component.State
				}
				if kind == "dispatcher" {
					d := newDispatcher(t, flux.FromSlice(exchanges(3, 1)), dispatch.WithSchedulerSupplier(sup))
					c = d
				} else {
					c = newMain(t, flux.FromSlice(exchanges(3, 1)), testkit.Perform, sup)
				}
				errc := make(chan error, 1)
				go func() { errc <- c.Prepare(t.Context()) }()
				<-sup.entered
				start := time.Now()
				c.ForceStop()
				assert.Zero(t, time.Since(start), "ForceStop returned at once")
				assert.Equal(t, component.StateStopped, c.State())
				synctest.Wait()
				assert.False(t, testkit.Closed(c.Done()), "Done waits for Prepare, which waits in the supplier")
				close(sup.release)
				err := <-errc
				require.ErrorIs(t, err, dispatch.ErrStopped, "Prepare reports the stop")
				<-c.Done()
				assert.ErrorIs(t, c.Start(), dispatch.ErrIllegalState, "no restart, and no silent no-op")
				assert.Equal(t, component.StateStopped, c.State())
			})
		})
	}
}

// The same without an order between the force and the end of Prepare:
// ForceStop runs on one goroutine while the supplier returns on another
// (-race checks that Prepare's results are not written while a stop reads
// them).
func TestForceStopRacingTheEndOfPrepare(t *testing.T) {
	for range 20 {
		sup := newGatedSupplier()
		var d *dispatch.Dispatcher[testkit.Exchange]
		sup.wait = func() {
			// Return as soon as the force began, with no synchronisation
			// with the rest of ForceStop.
			for d.State() != component.StateStopped {
				runtime.Gosched()
			}
		}
		d = newDispatcher(t, flux.FromSlice(exchanges(3, 1)), dispatch.WithSchedulerSupplier(sup))
		errc := make(chan error, 1)
		go func() { errc <- d.Prepare(t.Context()) }()
		<-sup.entered
		d.ForceStop()
		assert.ErrorIs(t, <-errc, dispatch.ErrStopped)
		<-d.Done()
	}
}

// A handler's context is done once the dispatcher's Done is closed, whatever
// the way it ended: by itself, by a graceful stop, by a force.
func TestHandlerContextIsDoneOnceDone(t *testing.T) {
	// src is one exchange, then, but for "source end", a wait for a stop.
	src := func(stop string) flux.Flux[testkit.Exchange] {
		return flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
			if err := sink.Next(exchanges(1, 1)[0]); err != nil || stop == "source end" {
				return err
			}
			<-ctx.Done()
			return nil
		})
	}
	synctest.Test(t, func(t *testing.T) {
		for _, stop := range []string{"source end", "graceful", "force"} {
			var seen atomic.Pointer[context.Context]
			release := make(chan struct{})
			d := started(t, src(stop), func(ctx context.Context, _ testkit.Exchange) error {
				seen.Store(&ctx)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
			synctest.Wait() // the handler runs
			require.NoError(t, (*seen.Load()).Err(), "%s: not done while the dispatcher runs", stop)
			switch stop {
			case "source end":
				close(release)
			case "graceful":
				errc := make(chan error, 1)
				go func() { errc <- d.StopGracefully(context.Background()) }()
				synctest.Wait()
				require.NoError(t, (*seen.Load()).Err(), "not done while a graceful stop waits for the handler")
				close(release)
				require.NoError(t, <-errc)
			case "force":
				d.ForceStop()
				assert.ErrorIs(t, context.Cause(*seen.Load()), dispatch.ErrForceStopped)
			}
			<-d.Done()
			assert.Error(t, (*seen.Load()).Err(), "%s: the handler's ctx is done once Done closed", stop)
		}
	})
}

// StopGracefully called from a handler with the handler's ctx (or one
// derived from it) cannot wait for itself: it returns ErrIllegalState at
// once, and the stop it began goes on to the end.
func TestStopGracefullyFromItsOwnHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d *dispatch.Dispatcher[testkit.Exchange]
		stopped := make(chan error, 1)
		src := &countingSource{}
		d, err := dispatch.New("orders", orders, src.flux(-1, func(i int) testkit.Exchange {
			return testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%3)), Seq: i / 3}
		}), func(ctx context.Context, x testkit.Exchange) error {
			if x.Seq == 10 && x.ID.ID == itoa(0) {
				ctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				start := time.Now()
				err := d.StopGracefully(ctx)
				if time.Since(start) != 0 {
					err = errors.Join(err, errors.New("StopGracefully waited"))
				}
				stopped <- err
			}
			return nil
		}, quiet, dispatch.WithParallelism(3), dispatch.WithScheduler(newParallel(t, 2)))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		forceOnCleanup(t, d)
		err = <-stopped
		require.ErrorIs(t, err, dispatch.ErrIllegalState)
		assert.ErrorContains(t, err, `dispatcher "orders"`)
		<-d.Done() // the stop went on
		assert.NoError(t, d.Err())
		s := d.Stats()
		assert.Zero(t, s.InFlight)
		assert.Equal(t, src.pulled.Load(), s.Received)
		assert.LessOrEqual(t, s.Discarded, int64(1), "at most the exchange the source had in hand")
	})
}

// A graceful stop whose ctx ends while a handler runs names the dispatcher
// and the group of the running handler, and wraps ctx's error.
func TestStopGracefullyTimeoutNamesTheRunningGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p = 8
		id := aggregate.NewID(orders, "stuck")
		release := make(chan struct{})
		d := started(t, flux.FromSlice([]testkit.Exchange{{ID: id}, {ID: id, Seq: 1}}), func(context.Context, testkit.Exchange) error {
			<-release // ignores its ctx
			return nil
		}, dispatch.WithParallelism(p))
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, `dispatcher "orders"`)
		assert.ErrorContains(t, err, "2 exchanges in flight")
		assert.ErrorContains(t, err, "Order/"+strconv.Itoa(id.Mod(p)), "the running group")
		assert.Equal(t, component.StateStopping, d.State())
		close(release)
		require.NoError(t, d.StopGracefully(t.Context()), "a later call waits again")
		assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	})
}

// A source that ignores its ctx: every exchange ended (InFlight 0), but a
// graceful drain waits for the source to return (it may hold an item it
// took), so the logical end (StateStopped) and the physical end (Done) come
// once it returned; a graceful stop whose ctx ends meanwhile says so.
func TestSourceIgnoringItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		xs := exchanges(5, 2)
		src := flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
			for _, x := range xs {
				if err := sink.Next(x); err != nil {
					return err
				}
			}
			<-release // ignores ctx
			return nil
		})
		d := started(t, src, testkit.Perform)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, `dispatcher "orders"`)
		assert.ErrorContains(t, err, "source is still running")
		assert.Equal(t, component.StateStopping, d.State(), "the drain waits for the source")
		assert.False(t, testkit.Closed(d.Done()), "not the physical end")
		assert.Equal(t, dispatch.Stats{Received: 5, Succeeded: 5}, d.Stats())
		close(release)
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.True(t, testkit.Closed(d.Done()))
	})
}

// A source that ignores the refusals too: the first exchange it emits after
// a graceful stop is handed on (it may be one it had taken), what it emits
// after that is counted and discarded with ErrStopped, and the identity
// holds with nothing in flight; the drain ends when the source returns.
func TestSourceEmittingAfterTheIntakeShut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shut, release := make(chan struct{}), make(chan struct{})
		var refusals atomic.Int64
		src := flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
			<-shut
			for _, x := range exchanges(4, 2) {
				_ = sink.Next(x) // ignores both the refusal and ctx
			}
			<-release
			return nil
		})
		// A Create sink refuses once its ctx is done, before the intake sees
		// the exchange; a Source of its own shows what the intake does.
		d := started(t, dispatch.Source[testkit.Exchange](rawSource{src: src, emit: func(emit func(testkit.Exchange) error, x testkit.Exchange) {
			if err := emit(x); errors.Is(err, dispatch.ErrStopped) {
				refusals.Add(1)
			}
		}}), testkit.Perform, dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
			assert.ErrorIs(t, reason, dispatch.ErrStopped)
		}))
		d.Quiesce()
		close(shut)
		synctest.Wait()
		assert.Equal(t, component.StateStopping, d.State())
		assert.Equal(t, dispatch.Stats{Received: 4, Succeeded: 1, Discarded: 3}, d.Stats())
		assert.EqualValues(t, 3, refusals.Load())
		close(release)
		<-d.Done()
		assert.Equal(t, component.StateStopped, d.State())
	})
}

// rawSource runs the exchanges src produces through emit by hand, calling
// the intake even after it refused (which a flux sink would not do).
type rawSource struct {
	src  flux.Flux[testkit.Exchange]
	emit func(func(testkit.Exchange) error, testkit.Exchange)
}

func (r rawSource) Subscribe(_ context.Context, emit func(testkit.Exchange) error) error {
	return r.src.Subscribe(context.Background(), func(x testkit.Exchange) error {
		r.emit(emit, x)
		return nil
	})
}

// An Observer that panics on every exchange is recovered without a stack
// capture per exchange: the logger gets one record with the stack, then one
// without per 1024 panics, and the accounting is intact.
func TestPanickingObserverIsCheap(t *testing.T) {
	const n = 20_000
	logs := &recordingHandler{}
	obs := &panickingObserver{where: "Finished"}
	xs := make([]testkit.Exchange, n)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%50)), Seq: i / 50}
	}
	d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithObserver(obs),
		dispatch.WithLogger(slog.New(logs)), dispatch.WithScheduler(newParallel(t, 2)))
	<-d.Done()
	require.NoError(t, d.Err())
	assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
	assert.EqualValues(t, n, obs.finishedTotal(), "every exchange reached the observer")
	first := logs.withMessage("dispatch: observer panicked")
	require.Len(t, first, 1, "the first panic is logged")
	v, ok := attr(first[0], "error")
	require.True(t, ok)
	var pe *dispatch.PanicError
	require.ErrorAs(t, v.Any().(error), &pe)
	assert.NotEmpty(t, pe.Stack, "with its stack")
	later := logs.withMessage("dispatch: observer keeps panicking")
	assert.Len(t, later, n/1024, "then once per 1024 panics")
	for _, r := range later {
		_, stack := attr(r, "error")
		assert.False(t, stack, "without a stack")
	}
}

// WithLogger reaches the scheduler a dispatcher makes for itself: a
// handler's Goexit is logged by that scheduler through the dispatcher's
// logger, not slog.Default().
func TestWithLoggerReachesTheOwnedScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &recordingHandler{}
		var calls atomic.Int64
		d := started(t, flux.FromSlice(exchanges(10, 2)), func(context.Context, testkit.Exchange) error {
			if calls.Add(1) == 4 {
				runtime.Goexit()
			}
			return nil
		}, dispatch.WithLogger(slog.New(logs)))
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: 10, Succeeded: 9, Failed: 1}, d.Stats())
		rs := logs.withMessage("schedulers: task panicked")
		require.Len(t, rs, 1, "the scheduler logged the Goexit through the dispatcher's logger")
		v, ok := attr(rs[0], "scheduler")
		require.True(t, ok)
		assert.Equal(t, "orders-Order", v.String())
		failed := logs.withMessage("dispatch: exchange failed")
		require.Len(t, failed, 1)
		v, _ = attr(failed[0], "error")
		assert.ErrorIs(t, v.Any().(error), schedulers.ErrGoexit)
	})
}

// Done closes only once the discard hook returned for every exchange
// discarded: a caller that reads what its hook saw after Done must see all
// of it. Here a force steals a lane that waits for the scheduler's only
// goroutine, and the hook of its exchange is held while the running handler
// (cancelled by the same force) returns: its accounting must not close
// Done before the hook returned.
func TestDoneWaitsForTheDiscardHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p = 2
		a, b := aggregate.NewID(orders, "a"), aggregate.NewID(orders, "b")
		for k := 0; a.Mod(p) == b.Mod(p); k++ {
			b = aggregate.NewID(orders, "b"+strconv.Itoa(k))
		}
		entered, release := make(chan struct{}), make(chan struct{})
		var hooked atomic.Int64
		d := started(t, flux.FromSlice([]testkit.Exchange{{ID: a, Do: testkit.Block}, {ID: b}}), testkit.Perform,
			dispatch.WithParallelism(p), dispatch.WithScheduler(newParallel(t, 1)),
			dispatch.WithDiscardHook(func(testkit.Exchange, error) {
				close(entered)
				<-release
				hooked.Add(1)
			}))
		synctest.Wait() // a's handler holds the only goroutine; b's lane waits for it
		forced := make(chan struct{})
		go func() { d.ForceStop(); close(forced) }()
		<-entered
		synctest.Wait() // a's handler returned, cancelled
		assert.False(t, testkit.Closed(d.Done()), "Done closed while the discard hook still runs")
		close(release)
		<-forced
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: 2, Failed: 1, Discarded: 1}, s)
		assert.Equal(t, s.Discarded, hooked.Load(), "the hook's count read after Done")
	})
}
