package flux_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// tracing wraps a scheduler and counts the tasks that run; inTask is set
// while one runs.
type tracing struct {
	schedulers.Scheduler
	runs   atomic.Int64
	inTask atomic.Bool
}

func (s *tracing) wrap(task schedulers.Task) schedulers.Task {
	return func(ctx context.Context) {
		s.runs.Add(1)
		s.inTask.Store(true)
		defer s.inTask.Store(false)
		task(ctx)
	}
}

func (s *tracing) Schedule(task schedulers.Task) error { return s.Scheduler.Schedule(s.wrap(task)) }

func (s *tracing) NewWorker() (schedulers.Worker, error) {
	w, err := s.Scheduler.NewWorker()
	return &tracingWorker{w, s}, err
}

type tracingWorker struct {
	schedulers.Worker
	s *tracing
}

func (w *tracingWorker) Schedule(task schedulers.Task) error {
	return w.Worker.Schedule(w.s.wrap(task))
}

// PublishOn delivers inside worker tasks, a bounded batch per task run, so
// pipelines sharing a scheduler take turns.
func TestPublishOnDeliversInBatchesOnTheWorker(t *testing.T) {
	s := &tracing{Scheduler: newParallel(t, 1)}
	const items, prefetch = 1000, 10
	n := 0
	err := flux.Range(0, items).PublishOn(s, prefetch).Subscribe(t.Context(), func(int) error {
		require.True(t, s.inTask.Load(), "an item delivered outside a worker task")
		n++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, items, n)
	require.GreaterOrEqual(t, s.runs.Load(), int64(items/prefetch))
}

// SubscribeOn runs the source inside a task of the scheduler. The plain
// subscription is verified first: the task's wrapper may still be returning
// once the subscription on the scheduler completed.
func TestSubscribeOnRunsTheSourceInATask(t *testing.T) {
	s := &tracing{Scheduler: newParallel(t, 1)}
	src := flux.Defer(func() flux.Flux[bool] { return flux.Just(s.inTask.Load()) })
	testkit.Verify(t, src).ExpectNext(false).ExpectComplete().VerifyT()
	testkit.Verify(t, src.SubscribeOn(s)).ExpectNext(true).ExpectComplete().VerifyT()
	require.Equal(t, int64(1), s.runs.Load())
}

// FlatMap runs at most concurrency inners at once.
func TestFlatMapConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const concurrency = 3
		var active, peak atomic.Int64
		f := flux.FlatMap(flux.Range(0, 20), func(v int) flux.Flux[int] {
			return flux.Defer(func() flux.Flux[int] {
				if a := active.Add(1); a > peak.Load() {
					peak.Store(a)
				}
				time.Sleep(time.Duration(v%4) * time.Millisecond)
				active.Add(-1)
				return flux.Just(v)
			})
		}, concurrency)
		testkit.Verify(t, f).ExpectNextCount(20).ExpectComplete().VerifyT()
		require.Equal(t, int64(concurrency), peak.Load())
	})
}

// Verify works in a bubble: virtual delays and a scheduler inside it.
func TestVerifyWithVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewSingle("virtual")
		require.NoError(t, err)
		defer func() { require.NoError(t, s.DisposeGracefully(t.Context())) }()
		start := time.Now()
		slow := delayed([]int{1, 2, 3}, []time.Duration{time.Hour})
		testkit.Verify(t, slow.PublishOn(s, 1)).ExpectNext(1, 2).ExpectNext(3).ExpectComplete().Timeout(4 * time.Hour).VerifyT()
		require.Equal(t, 3*time.Hour, time.Since(start))
	})
}
