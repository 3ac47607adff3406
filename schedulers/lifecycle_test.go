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
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "drain", 2)
		release := make(chan struct{})
		w := newWorker(t, r.s)
		r.block(t, w, release)
		r.block(t, r.s, release)
		for range 100 {
			require.NoError(t, w.Schedule(r.ran.task))
			require.NoError(t, r.s.Schedule(r.ran.task))
		}

		result := make(chan error, 1)
		go func() { result <- r.s.DisposeGracefully(context.Background()) }()
		synctest.Wait()
		assert.True(t, r.s.IsDisposed(), "disposed from the first stop call")
		assertRejected(t, r.s, w)
		assert.Empty(t, result, "graceful waits while tasks are queued")
		assert.False(t, isClosed(r.s.Done()))

		close(release)
		assert.NoError(t, <-result)
		assert.Equal(t, 200, r.ran.get(), "every queued task ran")
		assert.Zero(t, r.discarded.get())
		assert.True(t, isClosed(r.s.Done()))
	})
}

func TestDisposeGracefullyTimesOutThenCompletes(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "slow", 1)
		release := make(chan struct{})
		r.block(t, r.s, release)
		require.NoError(t, r.s.Schedule(r.ran.task))

		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, r.s.DisposeGracefully(ctx), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))

		canceled, cancelNow := context.WithCancel(context.Background())
		cancelNow()
		assert.ErrorIs(t, r.s.DisposeGracefully(canceled), context.Canceled)

		assert.Zero(t, r.ran.get())
		close(release) // draining went on after the timeout
		assert.NoError(t, r.s.DisposeGracefully(context.Background()))
		assert.Equal(t, 1, r.ran.get())
	})
}

func TestConcurrentGracefulCallersShareTheResult(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "shared", 2)
		release := make(chan struct{})
		r.block(t, r.s, release)
		results := make(chan error, 8)
		for range cap(results) {
			go func() { results <- r.s.DisposeGracefully(context.Background()) }()
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
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "force", 2)
		causes := make(chan error, 1)
		// One task watches its ctx, the other ignores it, so Dispose cannot
		// be waiting for running tasks.
		require.NoError(t, r.s.Schedule(func(ctx context.Context) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
		}))
		release := make(chan struct{})
		r.block(t, r.s, release)

		w := newWorker(t, r.s)
		for range 10 {
			require.NoError(t, r.s.Schedule(r.ran.task))
			require.NoError(t, w.Schedule(r.ran.task))
		}
		r.s.Dispose()
		assert.True(t, r.s.IsDisposed())
		assert.Equal(t, 20, r.discarded.get(), "each queued task reported once, before Dispose returns")
		assertRejected(t, r.s, w)
		assert.ErrorIs(t, <-causes, schedulers.ErrDisposed)

		synctest.Wait()
		assert.False(t, isClosed(r.s.Done()), "a task still runs")
		close(release)
		<-r.s.Done()
		assert.Zero(t, r.ran.get())
		r.s.Dispose() // idempotent
		assert.Equal(t, 20, r.discarded.get())
	})
}

// A worker's tasks queued while it executes are out of the ready queue; the
// goroutine executing it reports them.
func TestDisposeDiscardsTasksOfAnExecutingWorker(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "executing", 1)
		release := make(chan struct{})
		w := newWorker(t, r.s)
		r.block(t, w, release) // a batch of one
		for range 200 {
			require.NoError(t, w.Schedule(r.ran.task))
		}
		r.s.Dispose()
		close(release)
		<-r.s.Done()
		assert.Zero(t, r.ran.get())
		assert.Equal(t, 200, r.discarded.get(), "reported before Done closes")
	})
}

// batchBehind queues on w a batch of one blocking task and n counting ones,
// taken in one go by the goroutine, and returns once the blocking one runs.
func (r *rig) batchBehind(t *testing.T, w schedulers.Worker, n int, release <-chan struct{}) {
	t.Helper()
	gate := make(chan struct{})
	r.block(t, r.s, gate) // hold the goroutine while the batch is queued
	require.NoError(t, w.Schedule(blocking(&r.g, release)))
	for range n {
		require.NoError(t, w.Schedule(r.ran.task))
	}
	close(gate)
	synctest.Wait()
}

func TestDisposeDiscardsTheRestOfARunningBatch(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "batch", 1)
		release := make(chan struct{})
		r.batchBehind(t, newWorker(t, r.s), 10, release)
		r.s.Dispose()
		assert.Zero(t, r.discarded.get(), "a batch in hand is not in the queue")
		close(release)
		<-r.s.Done()
		assert.Zero(t, r.ran.get(), "no task of the batch starts after Dispose")
		assert.Equal(t, 10, r.discarded.get())
	})
}

func TestDisposeTakesOverGracefulStop(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "takeover", 1)
		w := newWorker(t, r.s)
		require.NoError(t, w.Schedule(func(ctx context.Context) { <-ctx.Done() }))
		for range 5 {
			require.NoError(t, w.Schedule(r.ran.task))
		}
		synctest.Wait()

		result := make(chan error, 1)
		go func() { result <- r.s.DisposeGracefully(context.Background()) }()
		synctest.Wait()
		assert.Empty(t, result, "the running task waits for cancellation")

		r.s.Dispose()
		assert.NoError(t, <-result)
		assert.True(t, isClosed(r.s.Done()))
		assert.Zero(t, r.ran.get())
		assert.Equal(t, 5, r.discarded.get())
	})
}

func TestConcurrentDisposalsAreSafe(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { concurrentDisposals(t, k) })
	}
}

func concurrentDisposals(t *testing.T, k kind) {
	r := newRig(t, k, "storm", 4)
	w := newWorker(t, r.s)
	const tasks = 1000
	for range tasks / 2 {
		require.NoError(t, r.s.Schedule(r.ran.task))
		require.NoError(t, w.Schedule(r.ran.task))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				r.s.Dispose()
				assert.True(t, r.s.IsDisposed())
			case 1:
				errs <- r.s.DisposeGracefully(context.Background())
			default:
				w.Dispose()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	<-r.s.Done()
	assert.Equal(t, tasks, r.ran.get()+r.discarded.get(), "every task ran or was discarded, once")
	assert.ErrorIs(t, r.s.Schedule(r.ran.task), schedulers.ErrRejected)
}

func TestWorkerDispose(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "wd", 1)
		release := make(chan struct{})
		w, other := newWorker(t, r.s), newWorker(t, r.s)
		r.block(t, w, release) // a batch of one
		for range 5 {
			require.NoError(t, w.Schedule(r.ran.task))
			require.NoError(t, other.Schedule(r.ran.task))
		}
		w.Dispose()
		w.Dispose()
		assert.Equal(t, 5, r.discarded.get())
		err := w.Schedule(r.ran.task)
		assert.ErrorIs(t, err, schedulers.ErrRejected)
		assert.ErrorContains(t, err, `"wd"`)
		assert.False(t, r.s.IsDisposed(), "the scheduler lives on")
		assert.EqualValues(t, 1, r.g.now.Load(), "the running task is not interrupted")

		close(release)
		drain(t, r.s)
		assert.Equal(t, 5, r.ran.get(), "the other worker's tasks ran")
		assert.Equal(t, 5, r.discarded.get())
	})
}

func TestWorkerDisposeDiscardsTheRestOfItsBatch(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		r := newRig(t, k, "wdb", 1)
		release := make(chan struct{})
		w := newWorker(t, r.s)
		r.batchBehind(t, w, 7, release)
		w.Dispose()
		close(release)
		drain(t, r.s)
		assert.Zero(t, r.ran.get(), "no task of the batch starts after Worker.Dispose")
		assert.Equal(t, 7, r.discarded.get())
	})
}

func TestDoneWaitsForDiscardReports(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		hookRelease := make(chan struct{})
		var reported counter
		s := k.new(t, "reports", 1, schedulers.WithDiscardHook(func(schedulers.Task) {
			<-hookRelease
			reported.n.Add(1)
		}))
		release := make(chan struct{})
		var g gauge
		require.NoError(t, s.Schedule(blocking(&g, release)))
		for range 3 {
			require.NoError(t, s.Schedule(func(context.Context) { t.Error("dropped task ran") }))
		}
		synctest.Wait()
		disposed := make(chan struct{})
		go func() {
			s.Dispose()
			close(disposed)
		}()
		synctest.Wait() // Dispose is in the hook
		close(release)
		synctest.Wait() // the goroutine has exited
		assert.False(t, isClosed(s.Done()), "Done waits for the discard hook")
		close(hookRelease)
		<-disposed
		<-s.Done()
		assert.Equal(t, 3, reported.get())
	})
}

// A task may hand its context to a goroutine that outlives it; that context
// must not outlive the scheduler.
func TestTaskContextIsDoneOnceTerminated(t *testing.T) {
	for _, tc := range []struct {
		stop  string
		cause error
	}{
		{"graceful", schedulers.ErrTerminated},
		{"force", schedulers.ErrDisposed},
		{"graceful then force", schedulers.ErrTerminated},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			eachKind(t, func(t *testing.T, k kind) {
				s := k.new(t, "ctx", 2)
				kept := make(chan context.Context, 2)
				keep := func(ctx context.Context) { kept <- ctx }
				require.NoError(t, s.Schedule(keep))
				require.NoError(t, newWorker(t, s).Schedule(keep))
				synctest.Wait()
				if tc.stop == "force" {
					s.Dispose()
					<-s.Done()
				} else {
					drain(t, s)
				}
				if tc.stop == "graceful then force" {
					s.Dispose()
				}
				for range cap(kept) {
					ctx := <-kept
					require.True(t, isClosed(ctx.Done()), "the task context is done once the scheduler terminated")
					assert.ErrorIs(t, context.Cause(ctx), tc.cause)
					assert.ErrorIs(t, ctx.Err(), context.Canceled)
				}
			})
		})
	}
}
