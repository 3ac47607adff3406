package dispatch_test

import (
	"context"
	"runtime"
	"strings"
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
	"github.com/aggflow/aggflow/testkit"
)

func newDispatcher(t *testing.T, source dispatch.Source[testkit.Exchange], opts ...dispatch.Option[testkit.Exchange]) *dispatch.Dispatcher[testkit.Exchange] {
	t.Helper()
	d, err := dispatch.New("orders", orders, source, testkit.Perform, append([]dispatch.Option[testkit.Exchange]{quiet}, opts...)...)
	require.NoError(t, err)
	return d
}

func assertIllegal(t *testing.T, err error, state string) {
	t.Helper()
	require.ErrorIs(t, err, dispatch.ErrIllegalState)
	assert.ErrorContains(t, err, `dispatcher "orders"`)
	assert.ErrorContains(t, err, "from state "+state)
}

// Wow's state table (S-1.10.2), row by row, from NEW.
func TestLifecycleFromNew(t *testing.T) {
	d := newDispatcher(t, flux.Empty[testkit.Exchange]())
	assert.Equal(t, component.StateNew, d.State())
	assertIllegal(t, d.Start(), "NEW")

	q := newDispatcher(t, flux.Empty[testkit.Exchange]())
	q.Quiesce()
	assert.Equal(t, component.StateStopped, q.State(), "NEW -quiesce-> STOPPED")
	assert.True(t, testkit.Closed(q.Done()))
	assertIllegal(t, q.Prepare(t.Context()), "STOPPED")

	f := newDispatcher(t, flux.Empty[testkit.Exchange]())
	f.ForceStop()
	f.ForceStop()
	assert.Equal(t, component.StateStopped, f.State(), "NEW -force-> STOPPED, safe before Prepare")
	assert.True(t, testkit.Closed(f.Done()))
	assert.NoError(t, f.StopGracefully(t.Context()), "stop before start")
}

func TestLifecycleFromPrepared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, stop := range []func(d *dispatch.Dispatcher[testkit.Exchange]){
			(*dispatch.Dispatcher[testkit.Exchange]).Quiesce,
			(*dispatch.Dispatcher[testkit.Exchange]).ForceStop,
		} {
			src := &countingSource{}
			d := newDispatcher(t, src.flux(-1, func(i int) testkit.Exchange { return exchanges(1, 1)[0] }))
			require.NoError(t, d.Prepare(t.Context()))
			assert.Equal(t, component.StatePrepared, d.State())
			assertIllegal(t, d.Prepare(t.Context()), "PREPARED")
			synctest.Wait()
			assert.False(t, src.subscribed.Load(), "nothing is pulled before Start")
			stop(d)
			<-d.Done()
			assert.Equal(t, component.StateStopped, d.State())
			assert.False(t, src.subscribed.Load(), "a stop before Start ends it empty")
			assert.Equal(t, dispatch.Stats{}, d.Stats())
			assertIllegal(t, d.Start(), "STOPPED") // no restart, and no silent no-op
			assert.Equal(t, component.StateStopped, d.State())
		}
	})
}

func TestLifecycleFromRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{}
		d := newDispatcher(t, src.flux(-1, func(i int) testkit.Exchange {
			return testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: i, Do: testkit.Delay, Delay: time.Millisecond}
		}))
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		assert.Equal(t, component.StateRunning, d.State())
		require.NoError(t, d.Start(), "RUNNING -start-> no-op")
		assertIllegal(t, d.Prepare(t.Context()), "RUNNING")
		time.Sleep(10 * time.Millisecond) // virtual: let ten exchanges through
		d.Quiesce()
		assert.Equal(t, component.StateStopping, d.State())
		assertIllegal(t, d.Start(), "STOPPING")
		d.Quiesce()
		assert.Equal(t, component.StateStopping, d.State(), "idempotent")
		<-d.Done()
		assert.Equal(t, component.StateStopped, d.State())
		s := d.Stats()
		assert.Equal(t, src.pulled.Load(), s.Received, "every exchange handed over is accounted for")
		// The intake closed at once: at most the exchange the source had in
		// hand is refused (counted, discarded with ErrStopped).
		assert.LessOrEqual(t, s.Discarded, int64(1))
		assert.Equal(t, s.Received-s.Discarded, s.Succeeded, "the admitted exchanges drained")
		assert.Greater(t, s.Received, int64(10))
		d.Quiesce()
		d.ForceStop()
		assert.NoError(t, d.StopGracefully(t.Context()), "double stop")
	})
}

func TestLifecycleSourceCompletion(t *testing.T) {
	d := started(t, flux.FromSlice(exchanges(10, 3)), testkit.Perform)
	<-d.Done()
	assert.Equal(t, component.StateStopped, d.State(), "the pipeline ends with the source")
	assert.Equal(t, dispatch.Stats{Received: 10, Succeeded: 10}, d.Stats())
	assert.NoError(t, d.StopGracefully(t.Context()))
}

// blocking returns n exchanges of ids distinct ids that block until cancelled.
func blocking(n, ids int) []testkit.Exchange {
	xs := exchanges(n, ids)
	for i := range xs {
		xs[i].Do = testkit.Block
	}
	return xs
}

func TestForceStopDiscardsQueuedAndCancelsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p, budget = 4, 12
		obs := &countingObserver{}
		var mu sync.Mutex
		var discarded []testkit.Exchange // the hook runs concurrently
		var causes []error
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
			func(ctx context.Context, x testkit.Exchange) error {
				err := testkit.Perform(ctx, x)
				causes = append(causes, context.Cause(ctx)) // serial: one scheduler goroutine
				return err
			})
		source, emitted := counted(flux.FromSlice(blocking(100, 20)))
		d := started(t, source, rec.Handle,
			dispatch.WithParallelism(p), dispatch.WithMaxPending(budget), dispatch.WithObserver(obs),
			dispatch.WithScheduler(newParallel(t, 1)),
			dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
				assert.ErrorIs(t, reason, dispatch.ErrForceStopped)
				mu.Lock()
				discarded = append(discarded, x)
				mu.Unlock()
			}))
		synctest.Wait() // one handler runs, the budget is used up, the intake waits
		before := d.Stats()
		assert.Equal(t, int64(1), obs.started.Load())
		d.ForceStop()
		assert.Equal(t, component.StateStopped, d.State())
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, before.Received+1, s.Received, "nothing admitted after the force: the exchange the intake held waiting for room is refused")
		assert.Equal(t, dispatch.Stats{Received: s.Received, Failed: 1, Discarded: s.Received - 1}, s)
		assert.Equal(t, int64(1), obs.finished[dispatch.OutcomeCancelled].Load())
		assert.Equal(t, s.Discarded, obs.discarded.Load())
		assert.True(t, every(obs.reasons, dispatch.ErrForceStopped))
		assert.Len(t, discarded, int(s.Discarded))
		assert.Equal(t, []error{dispatch.ErrForceStopped}, causes, "the handler's ctx is cancelled with ErrForceStopped")
		require.NoError(t, testkit.NoLoss(emitted.Load(), s, rec.Calls()))
		assert.NoError(t, d.Err(), "a force is not an error")
	})
}

func TestForceStopDoesNotWaitForAHandlerIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started(t, flux.FromSlice(exchanges(5, 1)), func(context.Context, testkit.Exchange) error {
			<-release // ignores ctx
			return nil
		})
		synctest.Wait()
		d.ForceStop() // returns at once although the handler runs on
		synctest.Wait()
		assert.False(t, testkit.Closed(d.Done()), "Done waits for the handler")
		close(release)
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: 5, Succeeded: 1, Discarded: 4}, d.Stats())
	})
}

func TestForceDuringGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := started(t, flux.FromSlice(blocking(50, 10)), testkit.Perform, dispatch.WithParallelism(4))
		synctest.Wait()
		errc := make(chan error, 1)
		go func() { errc <- d.StopGracefully(t.Context()) }()
		synctest.Wait()
		assert.Equal(t, component.StateStopping, d.State(), "draining waits for the blocked handlers")
		d.ForceStop()
		require.NoError(t, <-errc, "the graceful waiter returns")
		assert.True(t, testkit.Closed(d.Done()))
		s := d.Stats()
		assert.Zero(t, s.InFlight)
		assert.Equal(t, s.Received, s.Failed+s.Discarded)
	})
}

func TestGracefulDeadlineThenForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(20, 2)
		for i := range xs {
			xs[i].Do, xs[i].Delay = testkit.Delay, time.Second
		}
		d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithParallelism(2))
		synctest.Wait() // all admitted before the stop begins
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, d.StopGracefully(ctx), context.DeadlineExceeded)
		assert.Equal(t, 2500*time.Millisecond, time.Since(start))
		assert.Equal(t, component.StateStopping, d.State(), "draining goes on")
		assert.False(t, testkit.Closed(d.Done()))
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, int64(20), s.Received)
		assert.Equal(t, int64(4), s.Succeeded, "two groups, one exchange a second, for 2.5 seconds")
		assert.Equal(t, int64(2), s.Failed, "the two running were cancelled")
		assert.Equal(t, int64(14), s.Discarded)
	})
}

func TestPrepareWithStoppedSupplier(t *testing.T) {
	sup, err := aggregate.NewSchedulerSupplier("sup")
	require.NoError(t, err)
	sup.ForceStop()
	d := newDispatcher(t, flux.Empty[testkit.Exchange](), dispatch.WithSchedulerSupplier(sup))
	require.ErrorIs(t, d.Prepare(t.Context()), aggregate.ErrStopped)
	assert.Equal(t, component.StateNew, d.State())
	d.ForceStop()
	<-d.Done()
}

func TestOwnedSchedulerIsDisposed(t *testing.T) {
	// No scheduler option: the dispatcher makes its own and disposes it;
	// goleak in TestMain sees any goroutine left behind.
	for _, force := range []bool{false, true} {
		d := started(t, flux.FromSlice(exchanges(100, 10)), testkit.Perform)
		if force {
			d.ForceStop()
		} else {
			require.NoError(t, d.StopGracefully(t.Context()))
		}
		<-d.Done()
	}
}

func TestConstructorsIgnoreZeroOptions(t *testing.T) {
	h := func(context.Context, testkit.Exchange) error { return nil }
	_, err := dispatch.New("d", orders, flux.Empty[testkit.Exchange](), h, dispatch.Option[testkit.Exchange]{}, quiet)
	assert.NoError(t, err)
	_, err = dispatch.NewKeyed("d", orders, flux.Empty[testkit.Exchange](), func(testkit.Exchange) int { return 0 }, h, dispatch.Option[testkit.Exchange]{}, quiet)
	assert.NoError(t, err)
	_, err = component.NewRuntime("rt", nil, nil)
	assert.NoError(t, err)
	sup, err := aggregate.NewSchedulerSupplier("s", nil)
	require.NoError(t, err)
	_, err = dispatch.NewMain("m", []aggregate.NamedAggregate{orders}, flux.Empty[testkit.Exchange](), h, sup, dispatch.Option[testkit.Exchange]{})
	assert.NoError(t, err)
	sup.ForceStop()
}

// prefixedOnce: the message starts with the package name, once, and names
// the component.
func prefixedOnce(t *testing.T, err error, names string) {
	t.Helper()
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "dispatch: "), msg)
	assert.Equal(t, 1, strings.Count(msg, "dispatch: "), msg)
	assert.Contains(t, msg, names)
}

func TestConstructorErrorsStartWithThePackage(t *testing.T) {
	h := func(context.Context, testkit.Exchange) error { return nil }
	_, err := dispatch.New("d", orders, flux.Empty[testkit.Exchange](), h, dispatch.WithMaxPending(0))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	prefixedOnce(t, err, `(dispatcher "d")`)
	_, err = dispatch.New("d", orders, flux.Empty[testkit.Exchange](), h, dispatch.WithDiscardHook[testkit.Exchange](nil))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	prefixedOnce(t, err, `(dispatcher "d")`)

	sup, err := aggregate.NewSchedulerSupplier("s")
	require.NoError(t, err)
	defer sup.ForceStop()
	_, err = dispatch.NewMain("m", []aggregate.NamedAggregate{orders}, flux.Empty[testkit.Exchange](), h, sup,
		dispatch.WithDiscardHook[testkit.Exchange](nil))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	prefixedOnce(t, err, `(main dispatcher "m")`)
	// Without named aggregates there is no child to check the options.
	_, err = dispatch.NewMain("m", nil, flux.Empty[testkit.Exchange](), h, sup, dispatch.WithParallelism(0))
	assert.ErrorIs(t, err, dispatch.ErrInvalidParallelism)
	_, err = dispatch.NewMain("m", nil, flux.Empty[testkit.Exchange](), h, sup, dispatch.WithMaxPending(0))
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
}

func TestZeroMailbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mb dispatch.Mailbox[int]
		go func() {
			synctest.Wait() // the Flux waits for a push
			assert.NoError(t, mb.Push(1))
			assert.NoError(t, mb.Push(2))
			mb.Close()
		}()
		xs, err := flux.Collect(t.Context(), mb.Flux())
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2}, xs)
	})
}

// A hook that ends its goroutine with runtime.Goexit on every discarded
// exchange (a test's t.FailNow) does not cut the discarding short: each
// queued exchange still reaches the hook once and is counted, and the
// dispatcher reaches its end. The stop's own goroutine is not ended.
func TestForceStopSurvivesAHookThatGoexits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p, budget = 4, 12
		var seen atomic.Int64
		source, emitted := counted(flux.FromSlice(blocking(100, 20)))
		d := started(t, source, testkit.Perform,
			dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
			dispatch.WithScheduler(newParallel(t, 1)),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
				if r.Outcome == dispatch.OutcomeDiscarded {
					seen.Add(1)
					runtime.Goexit()
				}
			}))
		synctest.Wait() // one handler runs, the budget is used up, the intake waits
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			d.ForceStop()
		}()
		<-stopped
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: s.Received, Failed: 1, Discarded: s.Received - 1}, s)
		assert.Equal(t, s.Discarded, seen.Load(), "every discarded exchange reached the hook once")
		assert.Equal(t, emitted.Load(), s.Received, "every exchange emitted was received")
	})
}
