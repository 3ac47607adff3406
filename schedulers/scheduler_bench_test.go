package schedulers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

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
	var wg sync.WaitGroup
	task := func(context.Context) { wg.Done() }
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		wg.Add(burst)
		for range burst {
			submit(task)
		}
		wg.Wait()
	}
	runtime.ReadMemStats(&after)
	tasks := float64(b.N) * burst
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tasks, "ns/task")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/tasks, "allocs/task")
}

// baselines runs, next to the scheduler's own sub-benchmarks, a fixed pool
// of n goroutines fed by one buffered channel and a goroutine per task.
func baselines(b *testing.B, n int) {
	b.Run("channel-pool", func(b *testing.B) {
		ch := make(chan schedulers.Task, burst)
		var pool sync.WaitGroup
		for range n {
			pool.Go(func() {
				for t := range ch {
					t(context.Background())
				}
			})
		}
		measure(b, func(t schedulers.Task) { ch <- t })
		close(ch)
		pool.Wait()
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
