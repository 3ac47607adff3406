package schedulers

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/aggflow/aggflow/internal/panics"
)

// Immediate returns the scheduler that runs each task on the caller's
// goroutine, inside Schedule, with context.Background() (never cancelled). It
// is a stateless singleton owning no goroutine: Dispose does nothing,
// DisposeGracefully returns nil at once, IsDisposed stays false and Done
// returns a channel that is never closed, since it is never disposed. A task
// panic is recovered and logged through slog.Default().
//
// Its workers run tasks inline too, so tasks of one worker are serial only
// as far as its callers are; after Worker.Dispose a worker rejects tasks with
// ErrRejected. Reactor: Schedulers.immediate() (ImmediateScheduler.java).
func Immediate() Scheduler { return immediateScheduler }

var immediateScheduler = &immediate{never: make(chan struct{})}

type immediate struct{ never chan struct{} }

func (immediate) Name() string { return "immediate" }

func (immediate) Schedule(task Task) error {
	if task == nil {
		return ErrNilTask
	}
	runLogged(task)
	return nil
}

func runLogged(task Task) {
	defer func() {
		if v := recover(); v != nil {
			logPanic(slog.Default(), "immediate", panics.New(v))
		}
	}()
	task(context.Background())
}

func (immediate) NewWorker() (Worker, error) { return &immediateWorker{}, nil }

func (immediate) DisposeGracefully(context.Context) error { return nil }

func (immediate) Dispose() {}

func (immediate) IsDisposed() bool { return false }

func (i *immediate) Done() <-chan struct{} { return i.never }

type immediateWorker struct{ disposed atomic.Bool }

func (w *immediateWorker) Schedule(task Task) error {
	if w.disposed.Load() {
		return workerRejected("immediate")
	}
	return immediateScheduler.Schedule(task)
}

func (w *immediateWorker) Dispose() { w.disposed.Store(true) }
