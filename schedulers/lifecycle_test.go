package schedulers_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertRejected checks that s and w refuse new work with ErrRejected.
func assertRejected(t *testing.T, s schedulers.Scheduler, w schedulers.Worker) {
	t.Helper()
	err := s.Schedule(func(context.Context) { t.Error("rejected task ran") })
	assert.ErrorIs(t, err, schedulers.ErrRejected)
	assert.ErrorContains(t, err, `"`+s.Name()+`"`, "the error names the scheduler")
	_, err = s.NewWorker()
	assert.ErrorIs(t, err, schedulers.ErrRejected)
	assert.ErrorIs(t, w.Schedule(func(context.Context) { t.Error("rejected task ran") }), schedulers.ErrRejected)
}

func TestDisposeGracefullyDrainsQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "drain", 2)
		release := make(chan struct{})
		var g gauge
		var ran counter
		w := newWorker(t, s)
		require.NoError(t, w.Schedule(blocking(&g, release)))
		require.NoError(t, s.Schedule(blocking(&g, release)))
		for range 100 {
			require.NoError(t, w.Schedule(ran.task))
			require.NoError(t, s.Schedule(ran.task))
		}
		synctest.Wait()
		require.EqualValues(t, 2, g.now.Load(), "both goroutines are held")

		result := make(chan error, 1)
		go func() { result <- s.DisposeGracefully(context.Background()) }()
		synctest.Wait()
		assert.True(t, s.IsDisposed(), "disposed from the first stop call")
		assertRejected(t, s, w)
		assert.Empty(t, result, "graceful waits while tasks are queued")
		assert.False(t, isClosed(s.Done()))

		close(release)
		assert.NoError(t, <-result)
		assert.Equal(t, 200, ran.get(), "every queued task ran")
		assert.True(t, isClosed(s.Done()))
	})
}

func TestDisposeGracefullyTimesOutThenCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "slow", 1)
		release := make(chan struct{})
		var g gauge
		var ran counter
		require.NoError(t, s.Schedule(blocking(&g, release)))
		require.NoError(t, s.Schedule(ran.task))

		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := s.DisposeGracefully(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))

		canceled, cancelNow := context.WithCancel(context.Background())
		cancelNow()
		assert.ErrorIs(t, s.DisposeGracefully(canceled), context.Canceled)

		assert.Zero(t, ran.get())
		close(release) // draining went on after the timeout
		assert.NoError(t, s.DisposeGracefully(context.Background()))
		assert.Equal(t, 1, ran.get())
	})
}

func TestConcurrentGracefulCallersShareTheResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "shared", 2)
		release := make(chan struct{})
		var g gauge
		require.NoError(t, s.Schedule(blocking(&g, release)))
		results := make(chan error, 8)
		for range cap(results) {
			go func() { results <- s.DisposeGracefully(context.Background()) }()
		}
		synctest.Wait()
		assert.Empty(t, results)
		close(release)
		for range cap(results) {
			assert.NoError(t, <-results)
		}
	})
}

func TestDisposeDropsQueuedAndCancelsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded counter
		s := newParallel(t, "force", 2, schedulers.WithDiscardHook(discarded.hook))
		release := make(chan struct{})
		causes := make(chan error, 1)
		// One task watches its ctx, the other ignores it, so Dispose cannot
		// be waiting for running tasks.
		require.NoError(t, s.Schedule(func(ctx context.Context) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
		}))
		var g gauge
		require.NoError(t, s.Schedule(blocking(&g, release)))
		synctest.Wait()

		var ran counter
		w := newWorker(t, s)
		for range 10 {
			require.NoError(t, s.Schedule(ran.task))
			require.NoError(t, w.Schedule(ran.task))
		}
		s.Dispose()
		assert.True(t, s.IsDisposed())
		assert.Equal(t, 20, discarded.get(), "each queued task reported once, before Dispose returns")
		assertRejected(t, s, w)
		assert.ErrorIs(t, <-causes, schedulers.ErrDisposed)

		synctest.Wait()
		assert.False(t, isClosed(s.Done()), "a task still runs")
		close(release)
		<-s.Done()
		assert.Zero(t, ran.get())
		assert.Equal(t, 20, discarded.get())
		s.Dispose() // idempotent
		assert.Equal(t, 20, discarded.get())
	})
}

func TestDisposeDiscardsTheRestOfARunningBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded counter
		s := newParallel(t, "batch", 1, schedulers.WithDiscardHook(discarded.hook))
		release := make(chan struct{})
		var g gauge
		var ran counter
		w := newWorker(t, s)
		require.NoError(t, w.Schedule(blocking(&g, release)))
		synctest.Wait() // the goroutine holds a batch of one
		for range 200 {
			require.NoError(t, w.Schedule(ran.task)) // queued while the worker executes
		}
		s.Dispose()
		close(release)
		<-s.Done()
		assert.Zero(t, ran.get())
		assert.Equal(t, 200, discarded.get(), "reported by the goroutine before Done closes")

		var discarded2 counter
		s2 := newParallel(t, "batch2", 1, schedulers.WithDiscardHook(discarded2.hook))
		w2 := newWorker(t, s2)
		release2 := make(chan struct{})
		gate := make(chan struct{})
		require.NoError(t, s2.Schedule(blocking(&g, gate))) // hold the goroutine
		synctest.Wait()
		require.NoError(t, w2.Schedule(blocking(&g, release2)))
		for range 10 {
			require.NoError(t, w2.Schedule(ran.task)) // one batch of 11
		}
		close(gate)
		synctest.Wait() // the batch's first task runs, ten wait in the batch
		s2.Dispose()
		assert.Zero(t, discarded2.get(), "a batch in hand is not in the queue")
		close(release2)
		<-s2.Done()
		assert.Zero(t, ran.get())
		assert.Equal(t, 10, discarded2.get())
	})
}

func TestDisposeTakesOverGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded counter
		s := newParallel(t, "takeover", 1, schedulers.WithDiscardHook(discarded.hook))
		w := newWorker(t, s)
		require.NoError(t, w.Schedule(func(ctx context.Context) { <-ctx.Done() }))
		var ran counter
		for range 5 {
			require.NoError(t, w.Schedule(ran.task))
		}
		synctest.Wait()

		result := make(chan error, 1)
		go func() { result <- s.DisposeGracefully(context.Background()) }()
		synctest.Wait()
		assert.Empty(t, result, "the running task waits for cancellation")

		s.Dispose()
		assert.NoError(t, <-result)
		assert.True(t, isClosed(s.Done()))
		assert.Zero(t, ran.get())
		assert.Equal(t, 5, discarded.get())
	})
}

func TestConcurrentDisposalsAreSafe(t *testing.T) {
	var discarded, ran counter
	s := newParallel(t, "storm", 4, schedulers.WithDiscardHook(discarded.hook))
	w := newWorker(t, s)
	const tasks = 1000
	for range tasks / 2 {
		require.NoError(t, s.Schedule(ran.task))
		require.NoError(t, w.Schedule(ran.task))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				s.Dispose()
			case 1:
				errs <- s.DisposeGracefully(context.Background())
			default:
				w.Dispose()
			}
			assert.True(t, s.IsDisposed() || i%3 == 2)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	<-s.Done()
	assert.Equal(t, tasks, ran.get()+discarded.get(), "every task ran or was discarded, once")
	assert.ErrorIs(t, s.Schedule(ran.task), schedulers.ErrRejected)
}

func TestWorkerDispose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded counter
		s := newParallel(t, "wd", 1, schedulers.WithDiscardHook(discarded.hook))
		release := make(chan struct{})
		var g gauge
		var ran counter
		w, other := newWorker(t, s), newWorker(t, s)
		require.NoError(t, w.Schedule(blocking(&g, release)))
		synctest.Wait() // the goroutine holds a batch of one
		for range 5 {
			require.NoError(t, w.Schedule(ran.task))
			require.NoError(t, other.Schedule(ran.task))
		}
		w.Dispose()
		w.Dispose()
		assert.Equal(t, 5, discarded.get())
		err := w.Schedule(ran.task)
		assert.ErrorIs(t, err, schedulers.ErrRejected)
		assert.ErrorContains(t, err, `"wd"`)
		assert.False(t, s.IsDisposed(), "the scheduler lives on")
		assert.EqualValues(t, 1, g.now.Load(), "the running task is not interrupted")

		close(release)
		require.NoError(t, s.DisposeGracefully(context.Background()))
		assert.Equal(t, 5, ran.get(), "the other worker's tasks ran")
		assert.Equal(t, 5, discarded.get())
	})
}

func TestWorkerDisposeDiscardsTheRestOfItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var discarded counter
		s := newParallel(t, "wdb", 1, schedulers.WithDiscardHook(discarded.hook))
		gate, release := make(chan struct{}), make(chan struct{})
		var g gauge
		var ran counter
		require.NoError(t, s.Schedule(blocking(&g, gate))) // hold the goroutine
		synctest.Wait()
		w := newWorker(t, s)
		require.NoError(t, w.Schedule(blocking(&g, release)))
		for range 7 {
			require.NoError(t, w.Schedule(ran.task)) // one batch of 8
		}
		close(gate)
		synctest.Wait()
		w.Dispose()
		close(release)
		require.NoError(t, s.DisposeGracefully(context.Background()))
		assert.Zero(t, ran.get(), "no task of the batch starts after Worker.Dispose")
		assert.Equal(t, 7, discarded.get())
	})
}
