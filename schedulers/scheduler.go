package schedulers

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/aggflow/aggflow/component"
)

// Task is a unit of work run by a Scheduler or a Worker. ctx is cancelled, with
// cause ErrDisposed, when the scheduler is disposed by force (Dispose). It is
// done, at the latest, once the scheduler has terminated either way:
// after a graceful disposal, with cause ErrTerminated.
type Task func(ctx context.Context)

// Scheduler runs Tasks on goroutines it owns.
//
// All methods are safe for concurrent use. A Scheduler starts no goroutine
// until the first task is scheduled; its owner must call DisposeGracefully or
// Dispose to release them.
type Scheduler interface {
	// Name returns the name given at construction; goroutines carry it as the
	// pprof label "scheduler".
	Name() string
	// Schedule runs task on some goroutine of the scheduler. Tasks scheduled
	// directly have no ordering between them. It never blocks and returns an
	// error wrapping ErrRejected once disposal began (ErrNilTask for nil).
	Schedule(task Task) error
	// NewWorker returns a serial queue on this scheduler: tasks scheduled on one
	// Worker run one at a time in submission order.
	// It returns an error wrapping ErrRejected once disposal began.
	NewWorker() (Worker, error)
	// DisposeGracefully rejects new tasks at once, lets every queued and running
	// task finish, and returns nil when every goroutine has exited, the task
	// context then being done (cause ErrTerminated). If ctx ends first it
	// returns ctx's error (errors.Is context.DeadlineExceeded or
	// context.Canceled) and draining goes on; a later call waits again for the
	// same termination.
	DisposeGracefully(ctx context.Context) error
	// Dispose rejects new tasks, drops the queued ones (each reported to the
	// discard hook), cancels the context of running tasks and returns without
	// waiting; Done tells when the last goroutine has exited.
	Dispose()
	// IsDisposed reports whether either disposal has begun.
	IsDisposed() bool
	// Done is closed once disposal has begun and every goroutine has exited.
	Done() <-chan struct{}
	// Context returns the context every task of the scheduler receives (or
	// the parent of it): cancelled with cause ErrDisposed when Dispose
	// begins, and done with cause ErrTerminated once the scheduler
	// terminated after a graceful disposal. It lets a user of a lent
	// scheduler learn of its disposal without scheduling a task.
	// Immediate's is context.Background(): it is never disposed.
	Context() context.Context
}

// Yielder is implemented by schedulers that let a task hand its own
// continuation back cheaply (NewParallel's, NewSingle's,
// NewBoundedElastic's). Yield queues task as Schedule does, with the same
// errors, but wakes no idle goroutine while one is running a task: called by
// a direct task (one given to Schedule) as its last act, the goroutine
// running it takes the ready queue next, so no other goroutine is woken only
// to find the work taken. It is never lost: with no goroutine running a
// task, it wakes one. From outside a task it is correct but may wait for a
// running task to end; use Schedule there. From a Worker's task likewise:
// its goroutine runs the rest of the Worker's batch (up to 64 tasks) first,
// so no later task of that batch may wait for the yielded one. The
// dispatchers yield a lane that still holds exchanges at the end of its
// batch.
type Yielder interface {
	Yield(task Task) error
}

// Batcher is a Scheduler that queues several direct tasks at once, for a
// producer that made many of them ready together (a dispatcher's batch that
// touched many groups): ScheduleAll is Schedule for each of tasks, in
// order, under one hold of the scheduler's lock, and wakes as many idle
// goroutines as the tasks need at once. It is all or nothing: once
// disposal began it queues none and returns the error Schedule returns; a
// nil task returns ErrNilTask and queues none. NewParallel's, NewSingle's
// and NewBoundedElastic's schedulers are Batchers. The caller may reuse
// tasks once it returns.
type Batcher interface {
	ScheduleAll(tasks []Task) error
}

// Worker is a serial task queue on a Scheduler. A Worker is not pinned to
// one goroutine: any free goroutine of its scheduler may run its next batch,
// so a blocked task holds one goroutine and never another worker.
type Worker interface {
	// Schedule appends task to the worker's queue. It never blocks and returns
	// an error wrapping ErrRejected once the worker or its scheduler is disposed
	// (ErrNilTask for nil).
	Schedule(task Task) error
	// Dispose drops the worker's tasks that have not started (each reported to
	// the discard hook) and rejects later ones. A running task is not cancelled.
	Dispose()
}

// PanicError is a task's recovered panic: the panic value and the stack of
// the task's goroutine (component.PanicError). It is the same type in every
// aggflow package, so one errors.As target matches a panic from any layer.
type PanicError = component.PanicError

// DefaultPoolSize is the default number of goroutines of a parallel scheduler:
// runtime.GOMAXPROCS(0) at start-up, or the environment variable
// AGGFLOW_POOL_SIZE when it holds a positive integer.
var DefaultPoolSize = envPositive("AGGFLOW_POOL_SIZE", runtime.GOMAXPROCS(0))

func envPositive(name string, fallback int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return fallback
}

// Option configures NewParallel, NewSingle and NewBoundedElastic; a nil
// Option is ignored.
type Option func(*options)

type options struct {
	onPanic   func(*PanicError)
	onDiscard func(Task)
	logger    *slog.Logger
	ttl       time.Duration
	ttlSet    bool
}

// WithPanicHook is called, on the goroutine that ran the task, with each task
// panic; it may be called from several goroutines at once and the goroutine
// serves no other task until it returns. The default logs the panic at error
// level through the scheduler's logger, with the scheduler's name, the value
// and the stack; nil keeps the default.
func WithPanicHook(hook func(*PanicError)) Option {
	return func(o *options) { o.onPanic = hook }
}

// WithDiscardHook is called once for each task dropped without running, by
// Dispose or Worker.Dispose, outside the scheduler's locks: on the goroutine
// calling the Dispose for tasks still queued, and on a scheduler goroutine
// for tasks it had already taken (the rest of a batch, or tasks queued on the
// worker it was running), always before Done closes. It may be called from
// several goroutines at once. nil (the default) does nothing.
func WithDiscardHook(hook func(Task)) Option {
	return func(o *options) { o.onDiscard = hook }
}

// WithTTL sets how long a goroutine of NewBoundedElastic stays idle before
// it exits (default DefaultTTL). d <= 0 makes the constructor return an
// error wrapping ErrInvalidOption, and so does WithTTL given to NewParallel
// or NewSingle, whose goroutines stay until disposal.
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.ttl, o.ttlSet = d, true }
}

// WithLogger sets the logger of the default panic hook (default, and for
// nil, slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}
