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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
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
	assert.False(t, testkit.Closed(p.Done()))
	assert.Equal(t, "lazy", p.Name())
	p.Dispose()
	require.NoError(t, single.DisposeGracefully(context.Background()))
	assert.True(t, testkit.Closed(p.Done()), "no goroutine ever started, so Done closes at once")
	assert.True(t, testkit.Closed(single.Done()))
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

// TestScheduleAllWakesWhatTheTasksNeed: tasks queued at once by
// ScheduleAll run as many at once as Schedule's would, each once, on no
// more goroutines than tasks; the goroutines parked by earlier work are
// woken for them.
func TestScheduleAllWakesWhatTheTasksNeed(t *testing.T) {
	for _, tc := range []struct {
		n, tasks int
		build    func(n int) (schedulers.Batcher, error)
	}{
		{3, 10, func(n int) (schedulers.Batcher, error) { return schedulers.NewParallel("three", n) }},
		{4, 2, func(n int) (schedulers.Batcher, error) { return schedulers.NewParallel("four", n) }},
		{3, 10, func(n int) (schedulers.Batcher, error) { return schedulers.NewBoundedElastic("elastic", n) }},
	} {
		synctest.Test(t, func(t *testing.T) {
			b, err := tc.build(tc.n)
			require.NoError(t, err)
			s := b.(schedulers.Scheduler)
			for round := range 2 { // the second round finds the goroutines parked
				var g gauge
				release := make(chan struct{})
				tasks := make([]schedulers.Task, tc.tasks)
				for i := range tasks {
					tasks[i] = blocking(&g, release)
				}
				require.NoError(t, b.ScheduleAll(tasks))
				synctest.Wait()
				running := min(tc.n, tc.tasks)
				assert.EqualValues(t, running, g.now.Load(), "round %d: blocking tasks running at once", round)
				assert.Equal(t, running, s.(interface{ Goroutines() int }).Goroutines(), "round %d: goroutines", round)
				close(release)
				synctest.Wait()
				assert.EqualValues(t, tc.tasks, g.started.Load(), "round %d: every task ran once", round)
				assert.EqualValues(t, running, g.peak.Load())
			}
			drain(t, s)
		})
	}
}

// TestScheduleAllIsAllOrNothing: a nil task, or a scheduler whose disposal
// began, queues none of the tasks.
func TestScheduleAllIsAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "all", 2)
		var ran atomic.Int32
		task := func(context.Context) { ran.Add(1) }
		assert.ErrorIs(t, s.ScheduleAll([]schedulers.Task{task, nil, task}), schedulers.ErrNilTask)
		require.NoError(t, s.ScheduleAll(nil))
		synctest.Wait()
		assert.Zero(t, ran.Load(), "nothing queued by the refused call")
		require.NoError(t, s.DisposeGracefully(t.Context()))
		err := s.ScheduleAll([]schedulers.Task{task})
		assert.ErrorIs(t, err, schedulers.ErrRejected)
		assert.ErrorContains(t, err, `"all"`)
		assert.Zero(t, ran.Load())
	})
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

// Tasks scheduled one at a time, at varying delays after the goroutines went
// idle (while they spin on the push count, as they park, once parked), by
// direct Schedule and through workers: every task runs, none is left queued
// with every goroutine parked. A lost wake-up hangs a round, which the
// deadline turns into a failure.
func TestNoLostWakeUpAroundSpin(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		s, err := schedulers.NewParallel("edge", n)
		require.NoError(t, err)
		w, err := s.NewWorker()
		require.NoError(t, err)
		ran := make(chan struct{}, 2)
		task := func(context.Context) { ran <- struct{}{} }
		for round := range 3000 {
			for range round % 24 { // from no delay to beyond the spins
				runtime.Gosched()
			}
			var wg sync.WaitGroup
			wg.Go(func() { require.NoError(t, s.Schedule(task)) })
			wg.Go(func() { require.NoError(t, w.Schedule(task)) })
			wg.Wait()
			for range 2 {
				select {
				case <-ran:
				case <-time.After(10 * time.Second):
					t.Fatalf("n=%d round %d: a scheduled task did not run", n, round)
				}
			}
		}
		require.NoError(t, s.DisposeGracefully(t.Context()))
	}
}

// Disposal while the goroutines spin: every goroutine exits and Done closes.
func TestDisposeDuringSpin(t *testing.T) {
	for range 200 {
		s, err := schedulers.NewParallel("edge", 4)
		require.NoError(t, err)
		ran := make(chan struct{}, 4)
		for range 4 {
			require.NoError(t, s.Schedule(func(context.Context) { ran <- struct{}{} }))
		}
		for range 4 {
			<-ran
		}
		s.Dispose()
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed after Dispose during the spin")
		}
	}
}

// yieldChain is one chain of continuations: each step runs for work (in the
// bubble's time), then yields the next step, from inside the task; a step
// that exits ends its goroutine with runtime.Goexit right after its Yield.
type yieldChain struct {
	steps  int
	work   []time.Duration // per step
	exitAt int             // the step that calls Goexit after its Yield; -1 for none
	worker bool            // the first step is scheduled on a Worker, whose batch may go on after the Yield
}

// Chains of Yields from inside tasks, from Workers' batches and from
// outside, on NewBoundedElastic with a short TTL (goroutines retiring
// between and during the chains) and on NewParallel, with goroutines
// ending by Goexit right after a Yield: every step runs exactly once, none
// is left queued while every goroutine is parked or retired, and a graceful
// disposal then ends every goroutine. In the bubble a lost wake-up shows as
// steps not run once every goroutine is durably blocked.
func TestPropertyYieldLosesNoContinuation(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(rt, "goroutines")
		elastic := rapid.Bool().Draw(rt, "elastic")
		chains := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) yieldChain {
			steps := rapid.IntRange(1, 6).Draw(rt, "steps")
			return yieldChain{
				steps:  steps,
				work:   rapid.SliceOfN(rapid.SampledFrom([]time.Duration{0, 0, time.Microsecond, 3 * time.Millisecond}), steps, steps).Draw(rt, "work"),
				exitAt: rapid.IntRange(-1, steps-1).Draw(rt, "exitAt"),
				worker: rapid.Bool().Draw(rt, "worker"),
			}
		}), 1, 6).Draw(rt, "chains")
		gaps := rapid.SliceOfN(rapid.SampledFrom([]time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond}), len(chains), len(chains)).Draw(rt, "gaps")
		outside := rapid.Bool().Draw(rt, "first step yielded from outside")

		synctest.Test(t, func(t *testing.T) {
			var (
				s interface {
					schedulers.Scheduler
					schedulers.Yielder
					Goroutines() int
				}
				err error
			)
			quietHook := schedulers.WithPanicHook(func(*schedulers.PanicError) {})
			if elastic {
				s, err = schedulers.NewBoundedElastic("yield", n, schedulers.WithTTL(time.Millisecond), quietHook)
			} else {
				s, err = schedulers.NewParallel("yield", n, quietHook)
			}
			if err != nil {
				t.Fatal(err)
			}
			ran := make([][]atomic.Int32, len(chains))
			for i, c := range chains {
				ran[i] = make([]atomic.Int32, c.steps)
			}
			var step func(i, k int) schedulers.Task
			step = func(i, k int) schedulers.Task {
				return func(context.Context) {
					c := chains[i]
					ran[i][k].Add(1)
					if c.work[k] > 0 {
						time.Sleep(c.work[k]) // the task's own work, in the bubble's time
					}
					if k+1 < c.steps {
						if err := s.Yield(step(i, k+1)); err != nil {
							t.Errorf("chain %d step %d: Yield: %v", i, k+1, err)
						}
					}
					if k == c.exitAt {
						runtime.Goexit()
					}
				}
			}
			for i, c := range chains {
				first := step(i, 0)
				switch {
				case c.worker:
					w, err := s.NewWorker()
					if err != nil {
						t.Fatal(err)
					}
					// The chain's first step, then more of the worker's
					// tasks in the same batch, after its Yield.
					for _, task := range []schedulers.Task{first, func(context.Context) { time.Sleep(time.Millisecond) }} {
						if err := w.Schedule(task); err != nil {
							t.Fatal(err)
						}
					}
				case outside:
					err = s.Yield(first)
				default:
					err = s.Schedule(first)
				}
				if err != nil {
					t.Fatal(err)
				}
				if gaps[i] > 0 {
					time.Sleep(gaps[i]) // let goroutines park, and retire past the TTL
				}
			}
			synctest.Wait() // every goroutine durably blocked: parked, retired or asleep
			time.Sleep(time.Second)
			synctest.Wait()
			for i, c := range chains {
				for k := range c.steps {
					if got := ran[i][k].Load(); got != 1 {
						t.Errorf("chain %d step %d ran %d times (goroutines %d): a continuation was lost or run twice", i, k, got, s.Goroutines())
					}
				}
			}
			if err := s.DisposeGracefully(t.Context()); err != nil {
				t.Errorf("DisposeGracefully: %v", err)
			}
		})
	})
}

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
		assert.False(t, testkit.Closed(r.s.Done()))

		close(release)
		assert.NoError(t, <-result)
		assert.Equal(t, 200, r.ran.get(), "every queued task ran")
		assert.Zero(t, r.discarded.get())
		assert.True(t, testkit.Closed(r.s.Done()))
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
		assert.False(t, testkit.Closed(r.s.Done()), "a task still runs")
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
		assert.True(t, testkit.Closed(r.s.Done()))
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
		assert.False(t, testkit.Closed(s.Done()), "Done waits for the discard hook")
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
					require.True(t, testkit.Closed(ctx.Done()), "the task context is done once the scheduler terminated")
					assert.ErrorIs(t, context.Cause(ctx), tc.cause)
					assert.ErrorIs(t, ctx.Err(), context.Canceled)
				}
			})
		})
	}
}

// docs/lifecycle.md, rule 7: a task's context is done once its scheduler
// terminated, after a graceful disposal too.
func TestTaskContextDoneAfterGracefulDisposal(t *testing.T) {
	s, err := schedulers.NewParallel("edge", 1)
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	require.NoError(t, s.Schedule(func(ctx context.Context) { got <- ctx }))
	ctx := <-got
	require.NoError(t, s.DisposeGracefully(context.Background()))
	<-s.Done()
	require.Error(t, ctx.Err(), "the task context is not done although the scheduler terminated")
}
