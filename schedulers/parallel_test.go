package schedulers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestConstructorsValidate(t *testing.T) {
	for _, n := range []int{0, -1} {
		s, err := schedulers.NewParallel("p", n)
		assert.ErrorIs(t, err, schedulers.ErrInvalidParallelism, "parallelism %d", n)
		assert.ErrorContains(t, err, "schedulers: ")
		assert.Nil(t, s)
	}
	_, err := schedulers.NewParallel("", 1)
	assert.ErrorIs(t, err, schedulers.ErrInvalidName)
	_, err = schedulers.NewSingle("")
	assert.ErrorIs(t, err, schedulers.ErrInvalidName)
}

func TestConstructorsReturnTheConcreteType(t *testing.T) {
	p, err := schedulers.NewParallel("orders", 3)
	require.NoError(t, err)
	single, err := schedulers.NewSingle("billing")
	require.NoError(t, err)
	assert.Equal(t, `parallel(3,"orders")`, p.String())
	assert.Equal(t, `parallel(1,"billing")`, single.String())
	var s schedulers.Scheduler = p // callers holding the interface keep compiling
	assert.Equal(t, "orders", s.Name())
	assert.Equal(t, `parallel(3,"orders")`, fmt.Sprint(s), "String is reached through the interface too")
	p.Dispose()
	single.Dispose()
}

func TestConstructorsStartNoGoroutine(t *testing.T) {
	p := newParallel(t, "lazy", 4)
	single, err := schedulers.NewSingle("lazy-single")
	require.NoError(t, err)
	_, err = p.NewWorker()
	require.NoError(t, err)
	goleak.VerifyNone(t)

	assert.False(t, p.IsDisposed())
	assert.False(t, isClosed(p.Done()))
	assert.Equal(t, "lazy", p.Name())
	p.Dispose()
	require.NoError(t, single.DisposeGracefully(context.Background()))
	assert.True(t, isClosed(p.Done()), "no goroutine ever started, so Done closes at once")
	assert.True(t, isClosed(single.Done()))
}

func TestScheduleRejectsNilTask(t *testing.T) {
	s := newParallel(t, "nil", 1)
	defer s.Dispose()
	w := newWorker(t, s)
	assert.ErrorIs(t, s.Schedule(nil), schedulers.ErrNilTask)
	assert.ErrorIs(t, w.Schedule(nil), schedulers.ErrNilTask)
}

func TestAtMostParallelismTasksRunAtOnce(t *testing.T) {
	for _, tc := range []struct {
		n     int
		build func() (schedulers.Scheduler, error)
	}{
		{3, func() (schedulers.Scheduler, error) { return schedulers.NewParallel("three", 3) }},
		{1, func() (schedulers.Scheduler, error) { return schedulers.NewSingle("one") }},
		{3, func() (schedulers.Scheduler, error) { return schedulers.NewBoundedElastic("elastic", 3) }},
	} {
		synctest.Test(t, func(t *testing.T) {
			s, err := tc.build()
			require.NoError(t, err)
			var g gauge
			release := make(chan struct{})
			for i := range 10 { // direct tasks and tasks of distinct workers
				target := schedulers.Worker(newWorker(t, s))
				if i%2 == 0 {
					target = s
				}
				require.NoError(t, target.Schedule(blocking(&g, release)))
			}
			synctest.Wait()
			assert.EqualValues(t, tc.n, g.started.Load(), "exactly n of 10 blocking tasks run")

			release <- struct{}{} // one task ends, its goroutine takes the next
			synctest.Wait()
			assert.EqualValues(t, tc.n+1, g.started.Load())
			assert.EqualValues(t, tc.n, g.now.Load())

			close(release)
			drain(t, s)
			assert.EqualValues(t, 10, g.started.Load())
			assert.EqualValues(t, tc.n, g.peak.Load())
		})
	}
}

func TestWorkerRunsTasksSeriallyInOrder(t *testing.T) {
	const tasks = 10_000
	s := newParallel(t, "fifo", 4)
	w := newWorker(t, s)
	var (
		active   atomic.Int32
		overlaps atomic.Int32
		order    []int // written only by the worker's tasks, which never overlap
		wg       sync.WaitGroup
	)
	wg.Add(tasks)
	for i := range tasks {
		require.NoError(t, w.Schedule(func(context.Context) {
			defer wg.Done()
			if active.Add(1) != 1 {
				overlaps.Add(1)
			}
			order = append(order, i)
			active.Add(-1)
		}))
		if i%100 == 0 {
			// Direct tasks compete for the same goroutines.
			require.NoError(t, s.Schedule(func(context.Context) {}))
		}
	}
	wg.Wait()
	drain(t, s)
	assert.Zero(t, overlaps.Load(), "two tasks of one worker ran at once")
	require.Len(t, order, tasks)
	for i, v := range order {
		if v != i {
			t.Fatalf("task %d ran at position %d", v, i)
		}
	}
}

func TestWorkersRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "pair", 2)
		var g gauge
		release := make(chan struct{})
		for range 2 {
			require.NoError(t, newWorker(t, s).Schedule(blocking(&g, release)))
		}
		synctest.Wait()
		assert.EqualValues(t, 2, g.now.Load(), "both workers run at once")
		close(release)
		drain(t, s)
	})
}

// Three backlogged workers on two goroutines: in every window of completions,
// each worker completes tasks. Reactor pins workers to threads round-robin,
// so the third worker shares a thread with the first and waits for its whole
// backlog (reactor-core issue 3954). Each task takes 1ms of virtual time, so
// that the two goroutines advance in step and a window counts rounds of the
// scheduler, not the whims of the OS scheduler.
func TestWorkersDoNotStarve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			workers = 3
			each    = 2000
			window  = 4 * 64 // completions; a worker waits at most ~2 batches
		)
		s := newParallel(t, "fair", 2)
		gate := make(chan struct{})
		// Hold both goroutines so that every backlog is queued before any runs.
		var g gauge
		require.NoError(t, s.Schedule(blocking(&g, gate)))
		require.NoError(t, s.Schedule(blocking(&g, gate)))
		synctest.Wait()

		var log recorder
		for id := range workers {
			w := newWorker(t, s)
			for range each {
				require.NoError(t, w.Schedule(func(context.Context) {
					time.Sleep(time.Millisecond) // simulated work
					log.add(id)
				}))
			}
		}
		close(gate)
		drain(t, s)

		order := log.snapshot()
		require.Len(t, order, workers*each)
		// Only windows in which every worker still had a backlog count.
		done := make([]int, workers)
		var counts [workers]int
		for i, id := range order {
			done[id]++
			if done[id] == each {
				break
			}
			counts[id]++
			if (i+1)%window == 0 {
				for w, c := range counts {
					assert.NotZero(t, c, "worker %d completed nothing in window ending at %d", w, i)
				}
				counts = [workers]int{}
			}
		}
	})
}

func TestBlockedWorkerDoesNotStopOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "blocked", 2)
		release := make(chan struct{})
		var g gauge
		stuck := newWorker(t, s)
		require.NoError(t, stuck.Schedule(blocking(&g, release)))
		var after counter
		require.NoError(t, stuck.Schedule(after.task))

		// Reactor would pin the third worker to the blocked worker's thread.
		var others counter
		for range 2 {
			w := newWorker(t, s)
			for range 1000 {
				require.NoError(t, w.Schedule(others.task))
			}
		}
		for range 100 {
			require.NoError(t, s.Schedule(others.task))
		}
		synctest.Wait()
		assert.Equal(t, 2100, others.get(), "every task of the other workers ran")
		assert.Zero(t, after.get(), "the blocked worker's next task waits")

		close(release)
		drain(t, s)
		assert.Equal(t, 1, after.get())
	})
}

func TestPanicGoesToHookAndGoroutineKeepsServing(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		panicsSeen := make(chan *schedulers.PanicError, 2)
		s := k.new(t, "panicky", 1, schedulers.WithPanicHook(func(p *schedulers.PanicError) {
			panicsSeen <- p
		}))
		w := newWorker(t, s)
		var ran counter
		require.NoError(t, s.Schedule(func(context.Context) { panic("boom") }))
		require.NoError(t, w.Schedule(func(context.Context) { panic(io.EOF) }))
		require.NoError(t, w.Schedule(ran.task))
		require.NoError(t, s.Schedule(ran.task))
		drain(t, s)

		assert.Equal(t, 2, ran.get(), "the goroutine ran the tasks after the panics")
		first, second := <-panicsSeen, <-panicsSeen
		assert.Equal(t, "boom", first.Value)
		assert.Contains(t, string(first.Stack), "parallel_test.go", "stack shows the panicking task")
		assert.ErrorIs(t, second, io.EOF)
		var pe *schedulers.PanicError
		assert.True(t, errors.As(error(second), &pe))
	})
}

func TestPanicIsLoggedByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		s := newParallel(t, "logged", 1, schedulers.WithLogger(logger))
		require.NoError(t, s.Schedule(func(context.Context) { panic("kaboom") }))
		drain(t, s)
		out := buf.String()
		assert.Contains(t, out, "level=ERROR")
		assert.Contains(t, out, "scheduler=logged")
		assert.Contains(t, out, "panic=kaboom")
		assert.Contains(t, out, "stack=")
	})
}

func TestGoroutinesCarrySchedulerLabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "labelled", 2)
		labels := make(chan string, 2)
		release := make(chan struct{})
		label := func(ctx context.Context) {
			v, _ := pprof.Label(ctx, "scheduler")
			labels <- v
			<-release
		}
		require.NoError(t, s.Schedule(label))
		require.NoError(t, newWorker(t, s).Schedule(label))
		synctest.Wait()

		var profile bytes.Buffer
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&profile, 1))
		assert.Contains(t, profile.String(), `"scheduler":"labelled"`)
		close(release)
		drain(t, s)
		assert.Equal(t, "labelled", <-labels)
		assert.Equal(t, "labelled", <-labels)
	})
}

// A task that calls runtime.Goexit (as t.FailNow does) ends its goroutine;
// the scheduler reports it, replaces the goroutine and loses nothing.
func TestGoexitInATaskLosesNothing(t *testing.T) {
	for _, stop := range []string{"graceful", "during graceful"} {
		eachKind(t, func(t *testing.T, k kind) {
			reports := make(chan *schedulers.PanicError, 2)
			s := k.new(t, "goexit", 1, schedulers.WithPanicHook(func(p *schedulers.PanicError) {
				reports <- p
			}))
			gate := make(chan struct{})
			var g gauge
			require.NoError(t, s.Schedule(blocking(&g, gate))) // queue one batch
			w := newWorker(t, s)
			var order recorder
			for i := range 10 {
				require.NoError(t, w.Schedule(func(context.Context) {
					if i == 3 {
						runtime.Goexit()
					}
					order.add(i)
				}))
			}
			require.NoError(t, s.Schedule(func(context.Context) { runtime.Goexit() }))
			var direct counter
			require.NoError(t, s.Schedule(direct.task))
			synctest.Wait()
			if stop == "during graceful" {
				go func() { assert.NoError(t, s.DisposeGracefully(context.Background())) }()
				synctest.Wait()
			}
			close(gate)
			drain(t, s)

			assert.Equal(t, []int{0, 1, 2, 4, 5, 6, 7, 8, 9}, order.snapshot())
			assert.Equal(t, 1, direct.get())
			for range 2 {
				p := <-reports
				assert.ErrorIs(t, p, schedulers.ErrGoexit)
			}
		})
	}
}

func TestGoexitThenDisposeDiscardsTheRest(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		var discarded counter
		s := k.new(t, "goexit-force", 1,
			schedulers.WithDiscardHook(discarded.hook),
			schedulers.WithPanicHook(func(*schedulers.PanicError) {}))
		w := newWorker(t, s)
		release := make(chan struct{})
		var ran counter
		require.NoError(t, w.Schedule(func(context.Context) {
			<-release
			runtime.Goexit()
		}))
		for range 5 {
			require.NoError(t, w.Schedule(ran.task))
		}
		synctest.Wait()
		s.Dispose()
		close(release)
		<-s.Done()
		assert.Zero(t, ran.get())
		assert.Equal(t, 5, discarded.get())
	})
}

// A task that yields its continuation as its last act keeps it on its own
// goroutine: no other goroutine is started or woken for it, and the chain
// runs in order. Scheduling it instead starts the second goroutine.
func TestYieldKeepsTheContinuationOnTheRunningGoroutine(t *testing.T) {
	for _, yield := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s, err := schedulers.NewParallel("yield", 2)
			require.NoError(t, err)
			const n = 100
			var ran []int // one task at a time: the chain is serial
			done := make(chan struct{})
			var step func(i int) schedulers.Task
			step = func(i int) schedulers.Task {
				return func(context.Context) {
					ran = append(ran, i)
					if i == n-1 {
						close(done)
						return
					}
					if yield {
						assert.NoError(t, s.Yield(step(i+1)))
					} else {
						assert.NoError(t, s.Schedule(step(i+1)))
					}
				}
			}
			require.NoError(t, s.Schedule(step(0)))
			<-done
			synctest.Wait()
			want := 1
			if !yield {
				want = 2
			}
			assert.Equal(t, want, s.Goroutines(), "yield %v", yield)
			assert.Len(t, ran, n)
			for i, v := range ran {
				require.Equal(t, i, v)
			}
			require.NoError(t, s.DisposeGracefully(t.Context()))
		})
	}
}

// Yield from outside any task, with every goroutine parked, still wakes
// one: the task is not left queued.
func TestYieldFromOutsideWakesAnIdleGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel("yield", 2)
		require.NoError(t, err)
		first := make(chan struct{})
		require.NoError(t, s.Yield(func(context.Context) { close(first) }))
		<-first
		synctest.Wait() // its goroutine spun and parked
		second := make(chan struct{})
		require.NoError(t, s.Yield(func(context.Context) { close(second) }))
		<-second
		assert.ErrorIs(t, s.Yield(nil), schedulers.ErrNilTask)
		require.NoError(t, s.DisposeGracefully(t.Context()))
		assert.ErrorIs(t, s.Yield(func(context.Context) {}), schedulers.ErrRejected)
	})
}
