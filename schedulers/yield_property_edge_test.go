package schedulers_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/schedulers"
)

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
