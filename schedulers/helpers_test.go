package schedulers_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
)

// built takes a constructor's results and returns what it built, failing
// t if it failed: built(schedulers.NewParallel(...))(t).
func built[S any](s S, err error) func(t *testing.T) S {
	return func(t *testing.T) S {
		t.Helper()
		require.NoError(t, err)
		return s
	}
}

func newParallel(t *testing.T, name string, n int, opts ...schedulers.Option) *schedulers.Parallel {
	t.Helper()
	return built(schedulers.NewParallel(name, n, opts...))(t)
}

func newElastic(t *testing.T, name string, n int, opts ...schedulers.Option) *schedulers.BoundedElastic {
	t.Helper()
	return built(schedulers.NewBoundedElastic(name, n, opts...))(t)
}

// testScheduler is what every constructor's scheduler offers.
type testScheduler interface {
	schedulers.Scheduler
	fmt.Stringer
	Goroutines() int
}

// kind is one constructor of a scheduler of n goroutines. Parallel and
// bounded elastic schedulers share one engine and one contract, so the
// contract's tests run over both.
type kind struct {
	name  string
	build func(name string, n int, opts ...schedulers.Option) (testScheduler, error)
}

var kinds = []kind{
	{"parallel", func(name string, n int, opts ...schedulers.Option) (testScheduler, error) {
		return schedulers.NewParallel(name, n, opts...)
	}},
	{"elastic", func(name string, n int, opts ...schedulers.Option) (testScheduler, error) {
		return schedulers.NewBoundedElastic(name, n, opts...)
	}},
}

func (k kind) new(t *testing.T, name string, n int, opts ...schedulers.Option) testScheduler {
	t.Helper()
	return built(k.build(name, n, opts...))(t)
}

// eachKind runs f in a synctest bubble for every kind, as a subtest.
func eachKind(t *testing.T, f func(t *testing.T, k kind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, k) })
		})
	}
}

func newWorker(t *testing.T, s schedulers.Scheduler) schedulers.Worker {
	t.Helper()
	w, err := s.NewWorker()
	require.NoError(t, err)
	return w
}

// gauge counts the tasks running at once and remembers the highest count.
type gauge struct {
	now, peak, started atomic.Int64
}

func (g *gauge) enter() {
	g.started.Add(1)
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// blocking returns a task that enters g and blocks until release is closed
// or receives a value.
func blocking(g *gauge, release <-chan struct{}) schedulers.Task {
	return func(context.Context) {
		g.enter()
		defer g.leave()
		<-release
	}
}

// counter is a discard hook (and a task body) that counts its calls.
type counter struct{ n atomic.Int64 }

func (c *counter) hook(schedulers.Task) { c.n.Add(1) }
func (c *counter) task(context.Context) { c.n.Add(1) }
func (c *counter) get() int             { return int(c.n.Load()) }

// recorder records the values appended to it, in order, from any goroutine.
type recorder struct {
	mu   sync.Mutex
	vals []int
}

func (r *recorder) add(v int) {
	r.mu.Lock()
	r.vals = append(r.vals, v)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.vals...)
}

// rig is a scheduler whose discard hook counts, with a counting task (ran)
// and a gauge for blocking tasks.
type rig struct {
	s         schedulers.Scheduler
	discarded counter
	ran       counter
	g         gauge
}

func newRig(t *testing.T, k kind, name string, n int) *rig {
	t.Helper()
	r := &rig{}
	r.s = k.new(t, name, n, schedulers.WithDiscardHook(r.discarded.hook))
	return r
}

// block schedules on target a task that blocks until release is closed, and
// waits (in a synctest bubble) until every goroutine is blocked.
func (r *rig) block(t *testing.T, target interface{ Schedule(schedulers.Task) error }, release <-chan struct{}) {
	t.Helper()
	require.NoError(t, target.Schedule(blocking(&r.g, release)))
	synctest.Wait()
}

// drain disposes s gracefully without a deadline and requires success.
func drain(t *testing.T, s schedulers.Scheduler) {
	t.Helper()
	require.NoError(t, s.DisposeGracefully(context.Background()))
}
