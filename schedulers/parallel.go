package schedulers

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/internal/panics"
)

// batchSize bounds how many tasks of one worker a goroutine runs before the
// worker goes back to the tail of the ready queue, so that a busy worker
// cannot starve the others.
const batchSize = 64

// Lifecycle states of a parallel scheduler; they only move forward.
const (
	running  = iota
	shutdown // DisposeGracefully began: reject, drain, exit
	disposed // Dispose began: reject, drop, cancel, exit
)

// Scheduling states of a worker.
const (
	idle      = iota // no pending task, not in the ready queue
	ready            // in the ready queue
	executing        // a goroutine runs a batch of its tasks
)

// entry is an element of the ready queue: a direct task or a worker with
// pending tasks (task is then nil).
type entry struct {
	task Task
	w    *worker
}

type parallel struct {
	name     string
	n        int
	opts     options
	labels   pprof.LabelSet
	ctx      context.Context
	cancel   context.CancelCauseFunc
	rejected error
	done     chan struct{}
	stopped  atomic.Bool // either disposal began
	forced   atomic.Bool // Dispose began: running batches discard the rest

	mu         sync.Mutex
	cond       sync.Cond // L = &mu; idle goroutines wait on it
	state      int
	ready      ring[entry]
	goroutines int // started and not yet exited
	waiting    int // goroutines in cond.Wait that no Signal has been sent to
}

// NewParallel returns a scheduler that runs tasks on at most parallelism
// goroutines, started one by one as tasks arrive (the constructor starts
// none) and kept until disposal. Tasks scheduled directly run in no
// particular order; tasks of one Worker run one at a time in submission
// order, and the Worker is not pinned to a goroutine. At most parallelism
// tasks run at once.
//
// It returns an error wrapping ErrInvalidName for an empty name and
// ErrInvalidParallelism for parallelism < 1. The caller owns the scheduler
// and must end it with DisposeGracefully or Dispose. Reactor:
// Schedulers.newParallel(name, n) (Schedulers.java, ParallelScheduler.java).
func NewParallel(name string, parallelism int, opts ...Option) (Scheduler, error) {
	if name == "" {
		return nil, ErrInvalidName
	}
	if parallelism < 1 {
		return nil, fmt.Errorf("%w: got %d for scheduler %q", ErrInvalidParallelism, parallelism, name)
	}
	s := &parallel{
		name:     name,
		n:        parallelism,
		opts:     buildOptions(opts),
		labels:   pprof.Labels("scheduler", name),
		rejected: fmt.Errorf("%w: scheduler %q is disposed", ErrRejected, name),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.cond.L = &s.mu
	if s.opts.onPanic == nil {
		s.opts.onPanic = func(p *PanicError) { logPanic(s.opts.logger, name, p) }
	}
	return s, nil
}

// NewSingle returns a scheduler with one goroutine: NewParallel(name, 1,
// opts...). Every task of it, direct or through any Worker, runs on that one
// goroutine in turn. Reactor: Schedulers.newSingle(name) (SingleScheduler.java).
func NewSingle(name string, opts ...Option) (Scheduler, error) {
	return NewParallel(name, 1, opts...)
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

// logPanic is the default panic hook.
func logPanic(l *slog.Logger, scheduler string, p *PanicError) {
	l.Error("schedulers: task panicked", "scheduler", scheduler, "panic", p.Value, "stack", string(p.Stack))
}

func workerRejected(scheduler string) error {
	return fmt.Errorf("%w: worker of scheduler %q is disposed", ErrRejected, scheduler)
}

func (s *parallel) Name() string { return s.name }

// String mirrors Reactor's ParallelScheduler.toString.
func (s *parallel) String() string { return fmt.Sprintf("parallel(%d,%q)", s.n, s.name) }

func (s *parallel) Schedule(task Task) error {
	if task == nil {
		return ErrNilTask
	}
	s.mu.Lock()
	if s.state != running {
		s.mu.Unlock()
		return s.rejected
	}
	s.ready.push(entry{task: task})
	s.wake()
	s.mu.Unlock()
	return nil
}

// wake makes sure a goroutine will pop the entry just pushed: it signals an
// idle goroutine, or starts one if fewer than n exist; otherwise every
// goroutine is busy and looks at the ready queue before it waits. Called
// with mu held.
func (s *parallel) wake() {
	switch {
	case s.waiting > 0:
		s.waiting--
		s.cond.Signal()
	case s.goroutines < s.n:
		s.goroutines++
		go s.loop()
	}
}

func (s *parallel) NewWorker() (Worker, error) {
	if s.stopped.Load() {
		return nil, s.rejected
	}
	return &worker{s: s}, nil
}

func (s *parallel) IsDisposed() bool { return s.stopped.Load() }

func (s *parallel) Done() <-chan struct{} { return s.done }

func (s *parallel) DisposeGracefully(ctx context.Context) error {
	s.mu.Lock()
	if s.state == running {
		s.stop(shutdown)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *parallel) Dispose() {
	s.mu.Lock()
	if s.state == disposed {
		s.mu.Unlock()
		return
	}
	s.forced.Store(true)
	s.stop(disposed)
	var dropped []Task
	for e, ok := s.ready.pop(); ok; e, ok = s.ready.pop() {
		if e.w == nil {
			dropped = append(dropped, e.task)
			continue
		}
		dropped = append(dropped, e.w.tasks.drain()...)
		e.w.state = idle
	}
	s.mu.Unlock()
	s.cancel(ErrDisposed)
	s.discard(dropped)
}

// stop moves to state (shutdown or disposed) and wakes every idle goroutine
// so that it sees the new state. Leaving running is what lets done close: by
// the last goroutine to exit, or here if none is alive, since no goroutine
// starts after that. Called with mu held.
func (s *parallel) stop(state int) {
	if s.state == running && s.goroutines == 0 {
		close(s.done)
	}
	s.state = state
	s.stopped.Store(true)
	s.waiting = 0
	s.cond.Broadcast()
}

func (s *parallel) discard(tasks []Task) {
	if s.opts.onDiscard == nil {
		return
	}
	for _, t := range tasks {
		s.opts.onDiscard(t)
	}
}

// loop is the body of every goroutine of the scheduler.
func (s *parallel) loop() {
	pprof.Do(s.ctx, s.labels, s.serve)
}

// serve pops entries from the ready queue until the scheduler stops and the
// queue is empty. For a worker it takes a batch of at most batchSize tasks
// under the lock and runs them outside it; the worker is "executing" for the
// while, so no other goroutine runs it, and it returns to the tail of the
// ready queue if tasks remain.
func (s *parallel) serve(ctx context.Context) {
	var batch [batchSize]Task
	s.mu.Lock()
	for {
		e, ok := s.ready.pop()
		if !ok {
			if s.state != running {
				break
			}
			s.waiting++
			s.cond.Wait()
			continue
		}
		if e.w == nil {
			batch[0] = e.task
			s.mu.Unlock()
			s.runBatch(ctx, nil, batch[:1])
			batch[0] = nil
			s.mu.Lock()
			continue
		}
		w := e.w
		k := w.tasks.popInto(batch[:])
		w.state = executing
		s.mu.Unlock()
		s.runBatch(ctx, w, batch[:k])
		clear(batch[:k])
		s.mu.Lock()
		switch {
		case w.tasks.len() == 0:
			w.state = idle
		case s.state == disposed:
			// Dispose could not reach this worker's queue while it executed.
			w.state = idle
			dropped := w.tasks.drain()
			s.mu.Unlock()
			s.discard(dropped)
			s.mu.Lock()
		default:
			w.state = ready
			s.ready.push(e)
		}
	}
	s.goroutines--
	if s.goroutines == 0 {
		close(s.done)
	}
	s.mu.Unlock()
}

// runBatch runs tasks in order; once the scheduler or the worker w (if not
// nil) is disposed, it discards the tasks not yet started instead.
func (s *parallel) runBatch(ctx context.Context, w *worker, tasks []Task) {
	for i, t := range tasks {
		if s.forced.Load() || (w != nil && w.disposed.Load()) {
			s.discard(tasks[i:])
			return
		}
		s.run(ctx, t)
	}
}

// run is small so that its deferred recover is open-coded (no allocation).
func (s *parallel) run(ctx context.Context, t Task) {
	defer s.recoverTask()
	t(ctx)
}

func (s *parallel) recoverTask() {
	if v := recover(); v != nil {
		s.opts.onPanic(panics.New(v))
	}
}

type worker struct {
	s        *parallel
	tasks    ring[Task] // guarded by s.mu
	state    int        // guarded by s.mu
	disposed atomic.Bool
}

func (w *worker) Schedule(task Task) error {
	if task == nil {
		return ErrNilTask
	}
	s := w.s
	s.mu.Lock()
	if s.state != running {
		s.mu.Unlock()
		return s.rejected
	}
	if w.disposed.Load() {
		s.mu.Unlock()
		return workerRejected(s.name)
	}
	w.tasks.push(task)
	if w.state == idle {
		w.state = ready
		s.ready.push(entry{w: w})
		s.wake()
	}
	s.mu.Unlock()
	return nil
}

func (w *worker) Dispose() {
	s := w.s
	s.mu.Lock()
	if w.disposed.Swap(true) {
		s.mu.Unlock()
		return
	}
	// If w is in the ready queue it stays there, empty: the goroutine that
	// pops it finds nothing to run and marks it idle.
	dropped := w.tasks.drain()
	s.mu.Unlock()
	s.discard(dropped)
}
