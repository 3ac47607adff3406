package schedulers

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/aggflow/aggflow/component"
)

// Immediate returns the scheduler that runs each task on the caller's
// goroutine, inside Schedule, with context.Background() (never cancelled). It
// is a stateless singleton owning no goroutine: Dispose does nothing,
// DisposeGracefully returns nil at once and IsDisposed stays false. It never
// terminates, so Done returns nil, as context.Background().Done() does: a
// channel that is never closed, shared with no testing/synctest bubble, so that
// a goroutine of a bubble waiting on it (with its bubble's channels) is durably
// blocked and synctest.Wait returns. A closed channel would tell waiters that
// it terminated. A task panic is recovered and logged through slog.Default().
//
// Its workers run tasks inline too, so tasks of one worker are serial only
// as far as its callers are; after Worker.Dispose a worker rejects tasks with
// ErrRejected.
func Immediate() Scheduler { return immediateScheduler }

var immediateScheduler = &immediate{}

type immediate struct{}

func (immediate) Name() string { return "immediate" }

func (immediate) Schedule(task Task) error {
	if task == nil {
		return ErrNilTask
	}
	runLogged(task)
	return nil
}

func runLogged(task Task) {
	err := component.Call(func() error { task(context.Background()); return nil }, nil)
	if p, ok := err.(*PanicError); ok {
		logPanic(component.GuardLogger(slog.Default()), "immediate", p)
	}
}

func (immediate) NewWorker() (Worker, error) { return &immediateWorker{}, nil }

func (immediate) DisposeGracefully(context.Context) error { return nil }

func (immediate) Dispose() {}

func (immediate) IsDisposed() bool { return false }

func (*immediate) Done() <-chan struct{} { return nil }

func (*immediate) Context() context.Context { return context.Background() }

type immediateWorker struct{ disposed atomic.Bool }

func (w *immediateWorker) Schedule(task Task) error {
	if w.disposed.Load() {
		return workerRejected("immediate")
	}
	return immediateScheduler.Schedule(task)
}

func (w *immediateWorker) Dispose() { w.disposed.Store(true) }
