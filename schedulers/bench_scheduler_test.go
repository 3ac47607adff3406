package schedulers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aggflow/aggflow/schedulers"
)

// burst is how many tasks one benchmark iteration submits before it waits for
// all of them, so that the time measured includes running them and the
// figures are per task (ns/task, allocs/task), not per iteration.
const burst = 1024

// measure submits burst prebuilt tasks per iteration through submit, waits
// until all have run, and reports the cost per task. The task itself
// allocates nothing, so what is counted is the submitting path's.
func measure(b *testing.B, submit func(schedulers.Task)) {
	measureWork(b, burst, nil, submit)
}

// measureWork is measure with n tasks per iteration, each calling work
// (nil: nothing) before it counts itself done.
func measureWork(b *testing.B, n int, work func(), submit func(schedulers.Task)) {
	var wg sync.WaitGroup
	task := func(context.Context) { wg.Done() }
	if work != nil {
		task = func(context.Context) {
			work()
			wg.Done()
		}
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		wg.Add(n)
		for range n {
			submit(task)
		}
		wg.Wait()
	}
	runtime.ReadMemStats(&after)
	tasks := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tasks, "ns/task")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/tasks, "allocs/task")
}

// channelPool starts n goroutines running the tasks sent on the returned
// channel, of the given capacity, until b ends.
func channelPool(b *testing.B, n, capacity int) chan<- schedulers.Task {
	ch := make(chan schedulers.Task, capacity)
	var pool sync.WaitGroup
	for range n {
		pool.Go(func() {
			for t := range ch {
				t(context.Background())
			}
		})
	}
	b.Cleanup(func() {
		close(ch)
		pool.Wait()
	})
	return ch
}

// baselines runs, next to the scheduler's own sub-benchmarks, a fixed pool
// of n goroutines fed by one buffered channel and a goroutine per task.
func baselines(b *testing.B, n int) {
	b.Run("channel-pool", func(b *testing.B) {
		ch := channelPool(b, n, burst)
		measure(b, func(t schedulers.Task) { ch <- t })
	})
	b.Run("go-per-task", func(b *testing.B) {
		measure(b, func(t schedulers.Task) { go t(context.Background()) })
	})
}

func newBenchScheduler(b *testing.B, n int) schedulers.Scheduler {
	s, err := schedulers.NewParallel("bench", n)
	if err != nil {
		b.Fatal(err)
	}
	return disposeAfter(b, s)
}

// disposeAfter drains s when b ends.
func disposeAfter(b *testing.B, s schedulers.Scheduler) schedulers.Scheduler {
	b.Cleanup(func() {
		if err := s.DisposeGracefully(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return s
}

// BenchmarkSchedule measures direct Scheduler.Schedule on NewParallel with
// GOMAXPROCS goroutines.
func BenchmarkSchedule(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	b.Run("aggflow", func(b *testing.B) {
		s := newBenchScheduler(b, n)
		measure(b, func(t schedulers.Task) { _ = s.Schedule(t) })
	})
	baselines(b, n)
}

// BenchmarkWorker measures Worker.Schedule, the tasks spread round-robin
// over one worker (a single serial queue) or 64 (as many groups share one
// scheduler in a dispatcher), on NewParallel with GOMAXPROCS goroutines.
func BenchmarkWorker(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("aggflow/workers=%d", workers), func(b *testing.B) {
			s := newBenchScheduler(b, n)
			ws := make([]schedulers.Worker, workers)
			for i := range ws {
				ws[i], _ = s.NewWorker()
			}
			next := 0
			measure(b, func(t schedulers.Task) {
				_ = ws[next].Schedule(t)
				next = (next + 1) % workers
			})
		})
	}
	baselines(b, n)
}

// BenchmarkBlockingHandlers: handlers that block 50 µs (I/O), 2,000 tasks
// per iteration spread over 64 workers (groups), on two parallel schedulers
// and a bounded elastic one of 128 goroutines (64 busy at most: a worker
// is serial). ns/task is wall time / tasks, about the time a sleep really
// takes / goroutines blocked at once. Baselines: the tasks run inline, one
// after another (ns/task is then the real length of the sleep, which the
// OS timer slack can make far longer than 50 µs), and a goroutine per task.
func BenchmarkBlockingHandlers(b *testing.B) {
	const (
		tasks   = 2000
		workers = 64
		block   = 50 * time.Microsecond
	)
	sleep := func() { time.Sleep(block) }
	for _, tc := range []struct {
		name  string
		build func() (schedulers.Scheduler, error)
	}{
		{"parallel(2)", func() (schedulers.Scheduler, error) { return schedulers.NewParallel("blocking", 2) }},
		{fmt.Sprintf("parallel(DefaultPoolSize=%d)", schedulers.DefaultPoolSize), func() (schedulers.Scheduler, error) {
			return schedulers.NewParallel("blocking", schedulers.DefaultPoolSize)
		}},
		{"boundedElastic(128)", func() (schedulers.Scheduler, error) { return schedulers.NewBoundedElastic("blocking", 128) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := tc.build()
			if err != nil {
				b.Fatal(err)
			}
			disposeAfter(b, s)
			ws := make([]schedulers.Worker, workers)
			for i := range ws {
				ws[i], _ = s.NewWorker()
			}
			next := 0
			measureWork(b, tasks, sleep, func(t schedulers.Task) {
				_ = ws[next].Schedule(t)
				next = (next + 1) % workers
			})
		})
	}
	b.Run("inline", func(b *testing.B) {
		measureWork(b, tasks/20, sleep, func(t schedulers.Task) { t(context.Background()) })
	})
	b.Run("go-per-task", func(b *testing.B) {
		measureWork(b, tasks, sleep, func(t schedulers.Task) { go t(context.Background()) })
	})
}
