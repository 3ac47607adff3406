package schedulers

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/component"
)

// batchSize bounds how many tasks of one worker a goroutine runs before the
// worker goes back to the tail of the ready queue, so that a busy worker
// cannot starve the others.
const batchSize = 64

// idleSpins is how many times a goroutine that found the ready queue empty
// yields and looks again before it parks: work that arrives within a
// scheduler turn or two (a producer feeding idle workers one task at a time)
// is then taken without a park and a wake-up. Few, because each yield puts
// the goroutine in the runtime's global run queue, where it takes turns
// with the goroutine feeding it, on one processor, while an idle one
// sleeps: more yields cost a dispatcher's source goroutine a share of its
// processor (docs/benchmarks.md has the figures).
const idleSpins = 2

// Lifecycle states of an engine; they only move forward.
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

// engine is what Parallel and BoundedElastic are made of: at most n
// goroutines, started on demand, serving one ready queue of direct tasks and
// workers with pending tasks, and retiring after ttl idle (never if ttl is
// 0). Its methods are theirs.
type engine struct {
	name     string
	n        int
	ttl      time.Duration
	opts     options
	labels   pprof.LabelSet
	ctx      context.Context
	cancel   context.CancelCauseFunc
	rejected error
	done     chan struct{}
	stopped  atomic.Bool // either disposal began
	forced   atomic.Bool // Dispose began: running batches discard the rest

	pushes atomic.Uint32 // entries put on the ready queue: what idle spinners watch
	// returning counts goroutines back from a direct task that have not
	// taken mu yet: each pops the ready queue next, as a spinner does, so
	// that one preempted on its way back is not replaced by a new one.
	returning atomic.Int32

	mu         sync.Mutex
	state      int
	ready      ring[entry] // pushed through enqueue
	goroutines int         // started and not yet exited
	parked     []*runner   // idle goroutines not yet woken, in the order they parked
	spinning   int         // idle goroutines looking again before they park: each pops the ready queue next
	waking     int         // parked goroutines woken that have not taken mu back: each pops the ready queue next
	reporting  int         // callers of the discard hook outside a goroutine; hold done open
	closed     bool
}

// Parallel is the scheduler returned by NewParallel and NewSingle. It
// implements Scheduler; the package doc states its contract (goroutines,
// what blocks, ordering, contexts, panics, disposal). All methods are safe
// for concurrent use. The zero value is not usable: build one with a
// constructor.
type Parallel struct{ engine }

// NewParallel returns a scheduler that runs tasks on at most parallelism
// goroutines, started one by one as tasks arrive (the constructor starts
// none) and kept until disposal. Tasks scheduled directly run in no
// particular order; tasks of one Worker run one at a time in submission
// order, and the Worker is not pinned to a goroutine. At most parallelism
// tasks run at once.
//
// It returns an error wrapping ErrInvalidName for an empty name,
// ErrInvalidParallelism for parallelism < 1 and ErrInvalidOption for
// WithTTL, whose goroutines never retire. The caller owns the scheduler
// and must end it with DisposeGracefully or Dispose.
func NewParallel(name string, parallelism int, opts ...Option) (*Parallel, error) {
	o, err := buildOptions(opts)
	if err == nil && o.ttlSet {
		err = fmt.Errorf("%w: WithTTL applies to NewBoundedElastic only", ErrInvalidOption)
	}
	s := &Parallel{}
	if err := s.init(name, parallelism, 0, o, err); err != nil {
		return nil, err
	}
	return s, nil
}

// init validates the arguments of a constructor, which found optErr in its
// options, and sets s up; it starts no goroutine.
func (s *engine) init(name string, n int, ttl time.Duration, o options, optErr error) error {
	switch {
	case name == "":
		return ErrInvalidName
	case n < 1:
		return fmt.Errorf("%w: got %d for scheduler %q", ErrInvalidParallelism, n, name)
	case optErr != nil:
		return fmt.Errorf("%w (scheduler %q)", optErr, name)
	}
	*s = engine{
		name:     name,
		n:        n,
		ttl:      ttl,
		opts:     o,
		labels:   pprof.Labels("scheduler", name),
		rejected: fmt.Errorf("%w: scheduler %q is disposed", ErrRejected, name),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	if s.opts.onPanic == nil {
		s.opts.onPanic = func(p *PanicError) { logPanic(s.opts.logger, name, p) }
	}
	return nil
}

// NewSingle returns a scheduler with one goroutine: NewParallel(name, 1,
// opts...). Every task of it, direct or through any Worker, runs on that one
// goroutine in turn.
func NewSingle(name string, opts ...Option) (*Parallel, error) {
	return NewParallel(name, 1, opts...)
}

// buildOptions applies opts; the error is that of the first invalid one.
func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	o.logger = component.GuardLogger(o.logger)
	if o.ttlSet && o.ttl <= 0 {
		return o, fmt.Errorf("%w: WithTTL(%v): the TTL must be positive", ErrInvalidOption, o.ttl)
	}
	return o, nil
}

// logPanic is the default panic hook.
func logPanic(l *slog.Logger, scheduler string, p *PanicError) {
	l.Error("schedulers: task panicked", "scheduler", scheduler, "panic", p.Value, "stack", string(p.Stack))
}

func workerRejected(scheduler string) error {
	return fmt.Errorf("%w: worker of scheduler %q is disposed", ErrRejected, scheduler)
}

var (
	_ Scheduler = (*Parallel)(nil)
	_ Yielder   = (*Parallel)(nil)
	_ Yielder   = (*BoundedElastic)(nil)
	_ Batcher   = (*Parallel)(nil)
	_ Batcher   = (*BoundedElastic)(nil)
)

// Name returns the name given at construction, also the pprof label
// "scheduler" of its goroutines.
func (s *engine) Name() string { return s.name }

// String returns parallel(n,"name").
func (s *Parallel) String() string { return fmt.Sprintf("parallel(%d,%q)", s.n, s.name) }

// Goroutines returns how many goroutines the scheduler has started that
// have not exited: a snapshot, stale as soon as it returns, for metrics and
// tests. It takes the scheduler's lock.
func (s *engine) Goroutines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goroutines
}

// Schedule queues task to run on some goroutine of s, in no order relative
// to other direct tasks. It never blocks: it takes s's lock once and, if no
// goroutine is idle, starts one (while fewer than n exist). It returns
// ErrNilTask for nil and an error wrapping ErrRejected, naming s, once
// disposal began.
func (s *engine) Schedule(task Task) error { return s.submit(task, false) }

// Yield is Schedule without a wake-up while a goroutine is running a task
// (see Yielder): every goroutine that runs a task looks at the ready queue
// before it parks, and idle spinners watch the pushes.
func (s *engine) Yield(task Task) error { return s.submit(task, true) }

// submit is Schedule, and Yield when yield is set.
func (s *engine) submit(task Task, yield bool) error {
	if task == nil {
		return ErrNilTask
	}
	s.mu.Lock()
	if s.state != running {
		s.mu.Unlock()
		return s.rejected
	}
	s.enqueue(entry{task: task})
	var woken *runner
	if !yield || s.goroutines == len(s.parked) {
		woken = s.wake()
	}
	s.mu.Unlock()
	woken.unpark()
	return nil
}

// ScheduleAll is Schedule for each of tasks under one hold of the lock
// (see Batcher): what wake does for one entry it does for each, and the
// goroutines it takes off the parked list are unparked after the lock is
// released.
func (s *engine) ScheduleAll(tasks []Task) error {
	for _, t := range tasks {
		if t == nil {
			return ErrNilTask
		}
	}
	s.mu.Lock()
	if s.state != running {
		s.mu.Unlock()
		return s.rejected
	}
	var woken *runner // a chain through nextWoken: none allocated
	for _, t := range tasks {
		s.enqueue(entry{task: t})
		if r := s.wake(); r != nil {
			r.nextWoken, woken = woken, r
		}
	}
	s.mu.Unlock()
	for woken != nil {
		r := woken
		woken, r.nextWoken = r.nextWoken, nil
		r.unpark()
	}
	return nil
}

// wake makes sure a goroutine will pop the entry just pushed: none is
// needed while the goroutines spinning, being woken or returning from a
// direct task are at least as many as the entries (each pops one before it
// parks); else it wakes the goroutine parked last (so that the
// others stay idle and, with a TTL, retire), or starts one if fewer than n
// exist; otherwise every goroutine is busy and looks at the ready queue
// before it parks. So a user that never has more than k entries queued or
// running at once (a dispatcher of k groups) has at most k goroutines
// started for it. Called with mu held;
// it returns the goroutine taken off the parked list, if any, for the
// caller to unpark once it released mu, so that the woken goroutine does
// not find mu held.
func (s *engine) wake() (woken *runner) {
	switch {
	case s.ready.len() <= s.spinning+s.waking+int(s.returning.Load()):
	case len(s.parked) > 0:
		last := len(s.parked) - 1
		woken = s.parked[last]
		s.parked[last] = nil
		s.parked = s.parked[:last]
		woken.woken = true
		s.waking++
	case s.goroutines < s.n:
		s.goroutines++
		go s.loop()
	}
	return woken
}

// enqueue puts e at the tail of the ready queue. Called with mu held.
func (s *engine) enqueue(e entry) {
	s.ready.push(e)
	s.pushes.Add(1)
}

// NewWorker returns a serial queue on s (see Worker); it allocates one small
// struct and takes no lock. It returns an error wrapping ErrRejected once
// disposal began.
func (s *engine) NewWorker() (Worker, error) {
	if s.stopped.Load() {
		return nil, s.rejected
	}
	return &worker{s: s}, nil
}

// IsDisposed reports whether either disposal has begun (one atomic load).
func (s *engine) IsDisposed() bool { return s.stopped.Load() }

// Done is closed once disposal has begun, every goroutine of s has exited
// and every call of the discard hook has returned.
func (s *engine) Done() <-chan struct{} { return s.done }

func (s *engine) Context() context.Context { return s.ctx }

// DisposeGracefully rejects new tasks at once, lets every queued task run,
// and returns nil once every goroutine has exited, or ctx.Err() if ctx ends
// first (draining goes on; a later call waits for the same end). When the
// last goroutine exits, the task context is cancelled with cause
// ErrTerminated.
func (s *engine) DisposeGracefully(ctx context.Context) error {
	s.mu.Lock()
	if s.state == running {
		s.stop(shutdown)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		select {
		case <-s.done: // both happened: termination wins
			return nil
		default:
			return ctx.Err()
		}
	}
}

// Dispose rejects new tasks, reports each queued task to the discard hook
// before it returns, cancels the task context with cause ErrDisposed and
// returns without waiting for running tasks; Done tells when they ended.
// Idempotent; it may follow DisposeGracefully to cut a drain short (after a
// completed one, the context keeps its cause ErrTerminated).
func (s *engine) Dispose() {
	s.mu.Lock()
	if s.state == disposed {
		s.mu.Unlock()
		return
	}
	s.forced.Store(true)
	s.cancel(ErrDisposed) // before stop, whose closeIfDone may cancel too
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
	s.unlockAndDiscard(dropped)
}

// stop moves to state (shutdown or disposed) and wakes every idle goroutine
// so that it sees the new state. Called with mu held.
func (s *engine) stop(state int) {
	s.state = state
	s.stopped.Store(true)
	for _, r := range s.parked {
		r.unpark()
	}
	clear(s.parked)
	s.parked = s.parked[:0]
	s.closeIfDone()
}

// closeIfDone closes done once disposal has begun, no goroutine is left and
// no discard report is being made, so that Done means "nothing more will
// run or be reported". It cancels the task context first (a no-op after
// Dispose), so that no context of a task outlives the scheduler. Called with
// mu held; cancelling runs no user code.
func (s *engine) closeIfDone() {
	if s.state != running && s.goroutines == 0 && s.reporting == 0 && !s.closed {
		s.closed = true
		s.cancel(ErrTerminated)
		close(s.done)
	}
}

// unlockAndDiscard unlocks mu and reports dropped to the discard hook,
// keeping done open until the reports are made. Called with mu held, by a
// caller that is not one of the scheduler's goroutines.
func (s *engine) unlockAndDiscard(dropped []Task) {
	if len(dropped) == 0 {
		s.mu.Unlock()
		return
	}
	s.reporting++
	s.mu.Unlock()
	s.discard(dropped)
	s.mu.Lock()
	s.reporting--
	s.closeIfDone()
	s.mu.Unlock()
}

func (s *engine) discard(tasks []Task) {
	if s.opts.onDiscard == nil {
		return
	}
	for _, t := range tasks {
		s.opts.onDiscard(t)
	}
}

// runner is one goroutine of the scheduler and the batch it holds: tasks
// batch[next:n] have not started. Keeping that in a struct rather than in
// locals lets the goroutine's deferred cleanup put them back should a task
// end the goroutine with runtime.Goexit.
type runner struct {
	s         *engine
	w         *worker // owner of the batch; nil for a direct task
	batch     [batchSize]Task
	next, n   int
	inTask    bool          // a task runs: the only way the goroutine can end abruptly
	wakeup    chan struct{} // capacity 1: the one wake-up of a park
	woken     bool          // wake took r off the parked list and counts it in waking; guarded by s.mu
	nextWoken *runner       // ScheduleAll's chain of runners to unpark once it released s.mu
	idle      *time.Timer   // the TTL of a park; nil until the first park with a TTL
}

// loop is the body of every goroutine of the scheduler.
func (s *engine) loop() {
	r := &runner{s: s, wakeup: make(chan struct{}, 1)}
	pprof.Do(s.ctx, s.labels, r.serve)
}

// unpark wakes r, which the caller has just taken off the parked list. The
// send never blocks: r is sent at most one wake-up per park. With or
// without mu held; a nil r is no one to wake.
func (r *runner) unpark() {
	if r != nil {
		r.wakeup <- struct{}{}
	}
}

// park waits, with mu released, until r is woken or, with a TTL, until the
// TTL has passed. It reports whether r retires: the TTL passed and no
// wake-up was sent. Called and returns with mu held.
func (r *runner) park() (retire bool) {
	s := r.s
	s.parked = append(s.parked, r)
	s.mu.Unlock()
	if s.ttl <= 0 {
		<-r.wakeup
		s.mu.Lock()
		return false
	}
	if r.idle == nil {
		r.idle = time.NewTimer(s.ttl)
	} else {
		r.idle.Reset(s.ttl)
	}
	select {
	case <-r.wakeup:
		r.idle.Stop()
		s.mu.Lock()
		return false
	case <-r.idle.C:
	}
	s.mu.Lock()
	if i := slices.Index(s.parked, r); i >= 0 {
		s.parked = slices.Delete(s.parked, i, i+1)
		return true
	}
	<-r.wakeup // a waker took r off the list just before the TTL; its send follows, without mu
	return false
}

// serve pops entries from the ready queue until the scheduler stops and the
// queue is empty. For a worker it takes a batch of at most batchSize tasks
// under the lock and runs them outside it; the worker is "executing" for the
// while, so no other goroutine runs it, and it returns to the tail of the
// ready queue if tasks remain.
func (r *runner) serve(ctx context.Context) {
	defer r.abandon()
	s := r.s
	s.mu.Lock()
	spins := 0
	for {
		e, ok := s.ready.pop()
		if !ok {
			if s.state != running {
				break
			}
			if spins < idleSpins {
				// Spin without the lock, which the producers need to push.
				seen := s.pushes.Load()
				s.spinning++
				s.mu.Unlock()
				for ; spins < idleSpins && s.pushes.Load() == seen && !s.stopped.Load(); spins++ {
					runtime.Gosched()
				}
				s.mu.Lock()
				s.spinning--
				continue
			}
			if r.park() {
				break
			}
			if r.woken { // by wake, for an entry: it is this goroutine's to pop
				r.woken = false
				s.waking--
			}
			continue
		}
		spins = 0
		r.w, r.next = e.w, 0
		if e.w == nil {
			r.batch[0], r.n = e.task, 1
		} else {
			r.n = e.w.tasks.popInto(r.batch[:])
			e.w.state = executing
		}
		s.mu.Unlock()
		r.runBatch(ctx)
		// A worker's goroutine does not count: it pops its worker's entry
		// next, which release puts back without a wake.
		direct := r.w == nil
		if direct {
			s.returning.Add(1)
		}
		s.mu.Lock()
		if direct {
			s.returning.Add(-1)
		}
		if r.w != nil {
			if dropped := s.release(r.w); dropped != nil {
				s.mu.Unlock()
				s.discard(dropped)
				s.mu.Lock()
			}
			r.w = nil
		}
	}
	s.goroutines--
	s.closeIfDone()
	s.mu.Unlock()
}

// runBatch runs the batch in order; once the scheduler or the batch's worker
// is disposed, it discards the tasks not yet started instead.
func (r *runner) runBatch(ctx context.Context) {
	s, w := r.s, r.w
	for r.next < r.n {
		if s.forced.Load() || (w != nil && w.disposed.Load()) {
			rest := r.batch[r.next:r.n]
			r.next = r.n
			s.discard(rest)
			clear(rest)
			return
		}
		t := r.batch[r.next]
		r.batch[r.next] = nil // let the collector reclaim what t captured
		r.next++
		r.inTask = true
		s.run(ctx, t)
		r.inTask = false
	}
}

// release ends w's turn: back to the tail of the ready queue if it has
// tasks, else idle. Once the scheduler or w is disposed, its tasks are
// removed and returned for discarding (Dispose could not reach the queue of
// a worker that was executing). Called with mu held.
func (s *engine) release(w *worker) (dropped []Task) {
	switch {
	case w.tasks.len() == 0:
		w.state = idle
	case s.state == disposed || w.disposed.Load():
		w.state = idle
		dropped = w.tasks.drain()
	default:
		w.state = ready
		s.enqueue(entry{w: w})
	}
	return dropped
}

// abandon runs when the goroutine ends. It does nothing unless the
// goroutine ends inside a task; since run recovers panics, the task then
// called runtime.Goexit. abandon returns the unstarted rest of the batch to
// the head of its worker's queue, gives up the goroutine's place and has
// another goroutine take over the ready queue, so that nothing is lost and
// Done still closes.
func (r *runner) abandon() {
	if !r.inTask {
		return
	}
	s := r.s
	if r.w != nil {
		s.mu.Lock()
		r.w.tasks.prepend(r.batch[r.next:r.n])
		dropped := s.release(r.w)
		s.mu.Unlock()
		s.discard(dropped) // while this goroutine still counts, holding done open
	}
	s.mu.Lock()
	s.goroutines--
	var woken *runner
	if s.ready.len() > 0 {
		woken = s.wake()
	}
	s.closeIfDone()
	s.mu.Unlock()
	woken.unpark()
}

// run is small so that its deferred call is open-coded (no allocation).
func (s *engine) run(ctx context.Context, t Task) {
	returned := false
	defer s.settle(&returned)
	t(ctx)
	returned = true
}

// settle reports a panic of the task, or its call to runtime.Goexit (which
// recover cannot stop), to the panic hook.
func (s *engine) settle(returned *bool) {
	if v := recover(); v != nil {
		s.opts.onPanic(component.NewPanicError(v))
	} else if !*returned {
		s.opts.onPanic(component.NewPanicError(ErrGoexit))
	}
}

type worker struct {
	s        *engine
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
	var woken *runner
	if w.state == idle {
		w.state = ready
		s.enqueue(entry{w: w})
		woken = s.wake()
	}
	s.mu.Unlock()
	woken.unpark()
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
	s.unlockAndDiscard(w.tasks.drain())
}
