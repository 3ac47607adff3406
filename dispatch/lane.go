package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/internal/fastmod"
	"github.com/aggflow/aggflow/internal/queue"
	"github.com/aggflow/aggflow/schedulers"
)

// laneBatch bounds how many exchanges of one lane a scheduler goroutine
// handles before the lane goes back to the tail of the ready queue, so that
// a busy group cannot starve the others.
const laneBatch = 64

// Lane states. Only idle -> ready touches the scheduler; whoever moves a
// lane to running is its one consumer until it leaves the state.
const (
	idle    int32 = iota // empty, or being filled, and not scheduled
	ready                // a drain is scheduled, or about to be
	running              // a consumer is draining it
)

// item is an admitted exchange in its lane.
type item[T any] struct {
	x        T
	admitted int64 // nanoseconds since the engine's epoch; 0 when untimed
}

// lane is one group's queue (WithKeyOrdering: one id's): filled by the
// intake (its one producer), drained by whichever scheduler goroutine runs
// its task. An idle lane holds no slot (the queue is released as it goes
// idle): what a group once used costs its lane struct and its task, about
// 224 bytes, whatever the exchange's size.
//
// The fields are ordered for the cache: those read per exchange and written
// per turn or less (state among them, which the producer reads at each
// publication) come first, beside the queue's producer fields, and at least
// a cache line from its consumer fields and cur, which the consumer writes
// per exchange: next to them, each publication would read the line the
// consumer is writing.
type lane[T any] struct {
	e     *engine[T]
	ctx   context.Context // the handlers' context with the group index: the lane itself (groupContext), or keyed's
	task  schedulers.Task
	key   string // WithKeyOrdering: the id whose lane it is
	group int
	slot  int32 // WithKeyOrdering: its slot in the engine's keys, -1 until indexed
	state atomic.Int32

	q queue.SPSC[item[T]] // its producer and consumer fields a cache line apart

	// cur is the exchange whose handler runs, for stop errors to name its
	// aggregate id (engines with ids only): set by the consumer before the
	// handler, cleared after it; runningID pins it (the engine's pin) while
	// it copies the exchange, and the consumer waits for the unpin before it
	// pops. Next to the queue's consumer fields: the consumer writes it per
	// exchange.
	cur atomic.Pointer[item[T]]
}

// groupContext is a group lane seen as its handlers' context: the engine's
// context, with the lane's group as the value GroupOf reads, held in the
// lane rather than made apart, so that a group costs no allocation for it.
type groupContext[T any] lane[T]

func (c *groupContext[T]) Deadline() (time.Time, bool) { return c.e.ctx.Deadline() }
func (c *groupContext[T]) Done() <-chan struct{}       { return c.e.ctx.Done() }
func (c *groupContext[T]) Err() error                  { return c.e.ctx.Err() }

// Value returns a pointer to the group index for GroupOf's key (no
// allocation), else the engine's context's value.
func (c *groupContext[T]) Value(key any) any {
	if key == (groupKeyCtx{}) {
		return &c.group
	}
	return c.e.ctx.Value(key)
}

func (c *groupContext[T]) String() string {
	return fmt.Sprintf("%v.WithValue(group, %d)", c.e.ctx, c.group)
}

// track marks it as the exchange whose handler runs. Consumer only.
func (l *lane[T]) track(it *item[T]) {
	if l.e.idOf != nil {
		l.cur.Store(it)
	}
}

// untrack clears the running exchange, waiting while runningID copies it,
// so that its slot is not popped (and later reused) under the copy.
// Consumer only; a no-op when nothing is tracked.
func (l *lane[T]) untrack() {
	for {
		p := l.cur.Load()
		if p == nil || p != &l.e.pin && l.cur.CompareAndSwap(p, nil) {
			return
		}
		runtime.Gosched() // pinned for the copy of one exchange
	}
}

// runningID returns the aggregate id of the exchange whose handler runs in
// l, if one is tracked and no other caller reads it now.
func (e *engine[T]) runningID(l *lane[T]) (string, bool) {
	p := l.cur.Load()
	if p == nil || p == &e.pin || !l.cur.CompareAndSwap(p, &e.pin) {
		return "", false
	}
	x := p.x
	l.cur.Store(p)
	return e.aggregateID(x) // user code, after the unpin
}

// engine is the data path of one named aggregate's exchanges: the lanes, the
// scheduler that runs them, and the handler with its accounting. Its flow
// (gate, counters, budget) may be shared with other engines of one intake.
type engine[T any] struct {
	name   string // the dispatcher's, for errors and logs
	named  aggregate.MaterializedNamedAggregate
	f      *flow
	lanes  []atomic.Pointer[lane[T]]
	groups fastmod.Divisor // len(lanes), for the route by aggregate id
	chunks queue.Chunks[item[T]]
	sched  schedulers.Scheduler

	handler   Handler[T]
	idOf      func(T) aggregate.ID // nil when exchanges are keyed by a function
	pin       item[T]              // what a lane's cur holds while runningID copies its exchange: a marker, one per engine
	contextOf func(context.Context, T) context.Context
	labels    Labels
	obs       Observer // nil when none
	hooks     hooks[T]
	timed     bool // an observer or an outcome hook wants the times
	epoch     time.Time
	logger    *slog.Logger
	failLevel slog.Level
	policy    ErrorPolicy
	onFail    func(error) // under StopOnError: record and quiesce the owner
	onRetire  func(error) // the scheduler refused work or ended: retire this named aggregate
	retired   atomic.Bool // onRetire was called

	ctx    context.Context // the handlers' context
	cancel context.CancelCauseFunc
	halt   atomic.Bool // no more handling: forced, or the scheduler ended

	unwatch func() bool // takes back watch's callback on a lent scheduler's end; nil when owned

	keyed[T] // WithKeyOrdering's lanes; unused by group
}

// now returns the time since the epoch in nanoseconds, 0 when untimed.
func (e *engine[T]) now() int64 {
	if !e.timed {
		return 0
	}
	return int64(time.Since(e.epoch)) | 1 // never 0
}

// lane returns group g's lane, made on first use by the producer.
func (e *engine[T]) lane(g int) *lane[T] {
	if l := e.lanes[g].Load(); l != nil {
		return l
	}
	l := &lane[T]{e: e, group: g}
	l.ctx = (*groupContext[T])(l)
	l.q.Chunks = &e.chunks
	l.task = l.run
	e.lanes[g].Store(l)
	return l
}

// admitted tells the Observer an exchange is about to be enqueued.
func (e *engine[T]) admitted() {
	if e.obs != nil {
		e.obs.Admitted(e.ctx, e.labels)
	}
}

// enqueue appends an admitted exchange to group g (WithKeyOrdering: to id's
// lane), without the scheduling: kick says the caller made the lane ready
// and must schedule it, and a non-nil late is another lane to schedule (both
// after releasing any lock: on Immediate the drain runs right there).
// Producer only.
func (e *engine[T]) enqueue(g int, k aggregate.Key, x *T) (l, late *lane[T], kick bool) {
	l, late = e.put(g, k, x)
	l.q.Publish()
	return l, late, l.claim()
}

// put writes an admitted exchange into the next slot of its lane (as
// enqueue's), which the caller publishes. Producer only.
func (e *engine[T]) put(g int, k aggregate.Key, x *T) (l, late *lane[T]) {
	if e.keys != nil {
		l, late = e.keyLane(g, k)
	} else {
		l = e.lane(g)
	}
	it := l.q.Next() // written in place: an exchange is copied once
	it.x, it.admitted = *x, e.now()
	return l, late
}

// claim moves l from idle to ready and reports whether it did: then the
// caller must schedule it. Producer only, after a publication.
func (l *lane[T]) claim() bool {
	return l.state.Load() == idle && l.state.CompareAndSwap(idle, ready)
}

// schedule hands a lane its caller just made ready to the scheduler. Once
// halted (a force, or the scheduler's end) no drain is scheduled any more:
// the caller discards the lane itself, so that no lane waits on a task a
// disposal may drop.
func (e *engine[T]) schedule(l *lane[T]) { e.submit(l, false) }

// submit is schedule; yield says the caller is l's consumer ending its
// turn, so a scheduler that is a schedulers.Yielder need not wake another
// goroutine for l: the caller's takes the ready queue next.
func (e *engine[T]) submit(l *lane[T], yield bool) {
	if e.halt.Load() {
		e.steal(l, ready)
		return
	}
	var y schedulers.Yielder
	if yield {
		y, _ = e.sched.(schedulers.Yielder) // asked at a batch's end only, not at each kick
	}
	var err error
	if y != nil {
		err = y.Yield(l.task)
	} else {
		err = e.sched.Schedule(l.task)
	}
	if err != nil {
		e.rejected(err)
		e.steal(l, ready)
	}
}

// rejected reports, once, that the scheduler refused work, or ended, under
// the dispatcher (not after a force): what is queued is discarded (by the
// caller), this named aggregate is retired, and this is the owner's error.
func (e *engine[T]) rejected(err error) {
	if e.f.forced.Load() || e.retired.Swap(true) {
		return
	}
	err = fmt.Errorf("dispatch: dispatcher %q: %s retired: scheduler refused work: %w", e.name, e.named, err)
	if e.onRetire != nil {
		e.onRetire(err)
	}
}

// run is a lane's scheduled task.
func (l *lane[T]) run(ctx context.Context) {
	if !l.state.CompareAndSwap(ready, running) {
		return // a stop took the lane over
	}
	l.e.drain(l)
}

// watch makes the end of a lent scheduler reach the engine with no
// goroutine waiting for it: a callback on the scheduler's context, which
// runs (on a goroutine of its own, holding life) only if that context ends
// before the dispatcher's end takes it back (unwatch). When the scheduler's
// context ends (its owner disposes it by force, or it terminated) the
// callback cancels the handlers' context with that cause and discards the
// lanes whose tasks the scheduler dropped; a scheduler that ends under a
// running dispatcher stops it with an error. Called once, by Start.
func (e *engine[T]) watch(life *component.Lifecycle) {
	sctx := e.sched.Context()
	e.unwatch = context.AfterFunc(sctx, func() {
		if !life.Hold() {
			return // the dispatcher reached its end
		}
		defer life.Release()
		if err := life.Call(func() error { e.schedulerEnded(context.Cause(sctx)); return nil }); err != nil {
			life.Record(fmt.Errorf("dispatch: dispatcher %q: scheduler end: %w", e.name, err))
		}
	})
}

// schedulerEnded is the engine's reaction to the end of its scheduler's
// context, with that context's cause: under a running dispatcher (some
// exchange has not ended) the dispatcher stops with an error, recorded
// first, since what follows lets the last exchanges end; then no more
// handling, the handlers' context is done with cause, and the lanes no task
// will run any more are discarded.
func (e *engine[T]) schedulerEnded(cause error) {
	if !e.f.drainedOnce.Load() {
		e.rejected(fmt.Errorf("%w: scheduler %q ended: %w", schedulers.ErrRejected, e.sched.Name(), cause))
	}
	e.halt.Store(true)
	e.cancel(cause)
	if testHookSchedulerEnded != nil {
		testHookSchedulerEnded()
	}
	e.sweep()
}

// testHookSchedulerEnded, set by a test only, runs in schedulerEnded once
// the handlers' context is done: what that lets end may end meanwhile.
var testHookSchedulerEnded func()

// batch is what one drain did, settled once at its end, even when a handler
// ends the goroutine with runtime.Goexit.
type batch struct {
	n, ok, failed int64
	done          bool
}

// drain handles up to laneBatch exchanges of l, one at a time in order, then
// leaves the lane. Once halted (a force, or the scheduler's end) it stops
// at once: leaving, the lane is stolen and its rest discarded.
func (e *engine[T]) drain(l *lane[T]) {
	var b batch
	defer e.settle(l, &b)
	for !e.drainSome(l, &b) {
	}
	b.done = true
}

// drainSome is drain's loop under one deferred recover for the whole run
// rather than one per exchange. It returns true at the batch's end, the
// lane's or a halt; false when a handler (or WithContextOf) panicked: that
// exchange is accounted for as OutcomePanic and popped, and drain goes on.
// A handler that calls runtime.Goexit never returns: its exchange is
// accounted for here as OutcomePanic, with an error wrapping
// schedulers.ErrGoexit, before the goroutine unwinds (the scheduler
// replaces the goroutine; settle pops the exchange and the lane goes on).
// A panic outside the handler (in the accounting's foreign code: a log
// handler) goes on up, as settle expects.
func (e *engine[T]) drainSome(l *lane[T], b *batch) bool {
	var (
		it        *item[T]
		c         call
		inHandler bool
		completed bool
		p         *PanicError
	)
	defer func() {
		if completed || !inHandler {
			return
		}
		if p == nil {
			// Counted after the report, even when the report panics (a log
			// handler): settle pops the exchange regardless.
			defer e.f.failed.Add(1)
			e.failure(c.ctx, it.x, it.admitted, l.group, OutcomePanic, c.start,
				fmt.Errorf("dispatch: dispatcher %q: handler: %w", e.name, component.NewPanicError(component.ErrGoexit)))
			return
		}
		b.failed++
		l.untrack()
		e.failure(c.ctx, it.x, it.admitted, l.group, OutcomePanic, c.start, p)
		l.q.Pop()
		b.n++
	}()
	defer component.RecoverAt(&inHandler, true, &p) // the handler's panic only
	for b.n < laneBatch && !e.halt.Load() {
		var ok bool
		if it, ok = l.q.Peek(); !ok {
			break
		}
		c = call{ctx: l.ctx}
		inHandler = true
		l.track(it)
		err, panicked := e.call(l, it, &c)
		l.untrack()
		inHandler = false
		e.account(l, it, &c, err, panicked, b)
		l.q.Pop()
		b.n++
	}
	completed = true
	return true
}

// settle accounts for a batch and leaves the lane: back to ready at the tail
// of the scheduler's queue if exchanges remain, else idle. A batch cut short
// by runtime.Goexit has its current exchange accounted already by call.
func (e *engine[T]) settle(l *lane[T], b *batch) {
	if !b.done {
		l.untrack() // after a handler's runtime.Goexit
		l.q.Pop()
		b.n++
	}
	if b.ok != 0 { // an add of 0 is still a locked instruction
		e.f.succeeded.Add(b.ok)
	}
	if b.failed != 0 {
		e.f.failed.Add(b.failed)
	}
	e.f.budget.release(b.n)
	e.leave(l)
	e.f.check()
}

// leave ends a consumer's turn. After going idle it looks again: a push
// that saw the lane running before it went idle did not schedule it. The
// look-again can win the lane back after another consumer, scheduled by
// such a push, drained it already: the lane is empty then, and scheduling
// it would be a task with nothing to do, which may come after the last
// exchange ended and reach a scheduler its owner is disposing. So a lane
// won back is scheduled only if it holds something, else it goes idle and
// looks once more. It is won back as running, not ready: Len is exact only
// to its consumer, and a stop's sweep takes ready lanes and pops them.
func (e *engine[T]) leave(l *lane[T]) {
	if l.q.Len() > 0 {
		l.state.Store(ready)
		e.submit(l, true)
		return
	}
	for {
		l.q.Release()      // an idle lane holds no slot
		mark := l.q.Mark() // the consumer role ends with the store below
		if testHookMark != nil {
			testHookMark()
		}
		l.state.Store(idle)
		if testHookIdle != nil {
			testHookIdle()
		}
		if !l.q.Since(mark) || !l.state.CompareAndSwap(idle, running) {
			return
		}
		if l.q.Len() > 0 {
			l.state.Store(ready)
			e.submit(l, true) // this goroutine, ending its turn, takes the ready queue next
			return
		}
	}
}

// testHookIdle, set by a test only, runs in leave between the lane going
// idle and the look-again: the window in which another consumer may drain it.
// testHookMark runs before, between the mark and going idle: an exchange
// pushed then is the look-again's to find.
var testHookIdle, testHookMark func()

// steal takes the consumer role of l from state from (ready or idle) and
// discards what it holds, looking again after each round as leave does.
// It does nothing when the lane is running: its consumer discards.
func (e *engine[T]) steal(l *lane[T], from int32) {
	for l.state.CompareAndSwap(from, running) {
		var n int64
		for it, ok := l.q.Peek(); ok; it, ok = l.q.Peek() {
			e.dropped(it.x, it.admitted, l.group, e.stopCause())
			l.q.Pop()
			n++
		}
		e.f.budget.release(n)
		l.q.Release() // an idle lane holds no slot
		mark := l.q.Mark()
		l.state.Store(idle)
		if n > 0 { // an end may be the last; check sums every lane's counter
			e.f.check()
		}
		if !l.q.Since(mark) {
			return
		}
		from = idle
	}
}

// sweep discards every lane no consumer runs: after a force, or once the
// scheduler was disposed.
func (e *engine[T]) sweep() {
	if e.keys != nil {
		for _, l := range e.keyLanesNow() {
			e.steal(l, ready)
			e.steal(l, idle)
		}
		e.f.check()
		return
	}
	for i := range e.lanes {
		if l := e.lanes[i].Load(); l != nil {
			e.steal(l, ready)
			e.steal(l, idle)
		}
	}
	e.f.check()
}

// forceCause is the reason of a drop after a force.
func (e *engine[T]) forceCause() error {
	if err := context.Cause(e.ctx); err != nil {
		return err
	}
	return ErrForceStopped
}

// stopCause is the reason of a drop by steal: the force's, else the
// scheduler's refusal.
func (e *engine[T]) stopCause() error {
	if e.f.forced.Load() {
		return e.forceCause()
	}
	return fmt.Errorf("%w: dispatcher %q: scheduler disposed", schedulers.ErrRejected, e.name)
}

// account accounts for one exchange's outcome: err is the handler's.
func (e *engine[T]) account(l *lane[T], it *item[T], c *call, err error, panicked bool, b *batch) {
	var o Outcome
	switch {
	case err == nil:
		b.ok++
		if e.timed {
			e.finished(c.ctx, it.x, it.admitted, l.group, OutcomeSuccess, c.start, nil)
		}
		return
	case panicked:
		o = OutcomePanic
	case e.ctx.Err() != nil:
		o = OutcomeCancelled
	default:
		o = OutcomeError
	}
	b.failed++
	e.failure(c.ctx, it.x, it.admitted, l.group, o, c.start, err)
}

// call is what one handler call leaves for its accounting.
type call struct {
	ctx   context.Context // the exchange's
	start int64           // since the epoch, 0 when untimed
}

// since returns the time elapsed since start, 0 when untimed.
func (e *engine[T]) since(start int64) time.Duration {
	if start == 0 {
		return 0
	}
	return time.Duration(e.now() - start)
}

// call runs the handler with the exchange's context (c.ctx, the group's on
// entry); a nil context from WithContextOf is failed as its panic, without
// calling the handler. Panics and runtime.Goexit are drainSome's.
func (e *engine[T]) call(l *lane[T], it *item[T], c *call) (err error, panicked bool) {
	if e.contextOf != nil {
		if c.ctx = e.contextOf(c.ctx, it.x); c.ctx == nil {
			// A nil ctx would reach the handler, the Observer and the hooks
			// (the Results' wait on it panics): a bug of the function, failed
			// as its panic.
			c.ctx = l.ctx
			return component.NewPanicError(fmt.Errorf("dispatch: dispatcher %q: WithContextOf returned a nil context", e.name)), true
		}
	}
	if e.timed {
		c.start = e.now()
		if e.obs != nil {
			e.obs.Started(c.ctx, e.labels, waited(it.admitted, c.start))
		}
	}
	return e.handler(c.ctx, it.x), false
}

// waited is the time from admission to t, 0 when untimed.
func waited(admitted, t int64) time.Duration {
	if admitted == 0 || t == 0 {
		return 0
	}
	return time.Duration(t - admitted)
}

// finished reports a handled exchange (or one refused before a handler,
// with start 0) to the Observer and the outcome hooks.
func (e *engine[T]) finished(ctx context.Context, x T, admitted int64, group int, o Outcome, start int64, err error) {
	took := e.since(start)
	if e.hooks.handled() {
		r := Result[T]{Exchange: x, Labels: e.labels, Group: group, Outcome: o, Err: err,
			QueueWait: waited(admitted, start), Handling: took}
		defer e.hooks.ended(ctx, &r) // after the Observer, even when it ends the goroutine
	}
	if e.obs != nil {
		e.obs.Finished(ctx, e.labels, o, took, err)
	}
}

// failure reports a failed exchange (counted after this returns) and
// applies the error policy. The log and the policy are deferred before the
// Observer and the hooks are told, so that one of them ending the goroutine
// with runtime.Goexit costs the exchange neither.
func (e *engine[T]) failure(ctx context.Context, x T, admitted int64, group int, o Outcome, start int64, err error) {
	if e.policy == StopOnError && o != OutcomeCancelled && e.onFail != nil {
		// After the log, and even when it panics (a log handler's bug).
		defer func() {
			id, _ := e.aggregateID(x)
			e.onFail(fmt.Errorf("dispatch: dispatcher %q: %s %q: exchange failed (StopOnError): %w", e.name, e.named, id, err))
		}()
	}
	defer e.logFailure(ctx, x, o, err)
	e.finished(ctx, x, admitted, group, o, start, err)
}

// logFailure logs a failed exchange at the failure level (a panic at
// error level).
func (e *engine[T]) logFailure(ctx context.Context, x T, o Outcome, err error) {
	level := e.failLevel
	if o == OutcomePanic {
		level = slog.LevelError // a bug, not a refusal
	}
	if e.logger.Enabled(ctx, level) {
		attrs := []slog.Attr{slog.String("dispatcher", e.name), slog.String("named_aggregate", e.named.String()),
			slog.String("outcome", o.String()), slog.Any("error", err)}
		if id, ok := e.aggregateID(x); ok {
			attrs = append(attrs, slog.String("aggregate_id", id))
		}
		e.logger.LogAttrs(ctx, level, "dispatch: exchange failed", attrs...)
	}
}

// aggregateID returns x's aggregate id for logs, if the exchange type has
// one and its AggregateID does not panic.
func (e *engine[T]) aggregateID(x T) (id string, ok bool) {
	if e.idOf == nil {
		return "", false
	}
	var p error
	defer func() {
		if p != nil {
			id, ok = "", false
		}
	}()
	defer component.Catch(&p)
	return e.idOf(x).ID, true
}

// dropped accounts for an exchange dropped without being handled (group
// -1 and admitted 0 when refused at the intake). It counts last, so that
// once the count shows nothing in flight no hook of the exchange still runs.
func (e *engine[T]) dropped(x T, admitted int64, group int, reason error) {
	if e.obs != nil || len(e.hooks.outcomes) > 0 || len(e.hooks.discards) > 0 {
		r := Result[T]{Exchange: x, Labels: e.labels, Group: group, Outcome: OutcomeDiscarded, Err: reason,
			QueueWait: waited(admitted, e.now())}
		e.hooks.endedAside(e.ctx, &r, e.obs)
	}
	e.f.discarded.Add(1)
}

// queued returns how many exchanges were published into e's lanes so far.
// A lane is in e's set before its first publication, and keeps its count
// when WithKeyOrdering gives it to another id, so the sum only grows.
func (e *engine[T]) queued() int64 {
	var n uint64
	if e.keys != nil {
		e.keyMu.Lock()
		for l := range e.keys.lanes() {
			n += l.q.Pushed()
		}
		e.keyMu.Unlock()
		return int64(n)
	}
	for i := range e.lanes {
		if l := e.lanes[i].Load(); l != nil {
			n += l.q.Pushed()
		}
	}
	return int64(n)
}

// runningLane is a lane a consumer runs now, with its group as it was
// when found: WithKeyOrdering moves a lane to another id's group, under
// keyMu.
type runningLane[T any] struct {
	l     *lane[T]
	group int
}

// runningLanes returns the lanes a consumer runs now, by group.
func (e *engine[T]) runningLanes() []runningLane[T] {
	var ls []runningLane[T]
	if e.keys != nil {
		e.keyMu.Lock()
		for l := range e.keys.lanes() {
			if l.state.Load() == running {
				ls = append(ls, runningLane[T]{l, l.group})
			}
		}
		e.keyMu.Unlock()
		slices.SortFunc(ls, func(a, b runningLane[T]) int { return a.group - b.group })
		return ls
	}
	for i := range e.lanes {
		if l := e.lanes[i].Load(); l != nil && l.state.Load() == running {
			ls = append(ls, runningLane[T]{l, l.group})
		}
	}
	return ls
}

// end releases what the engine holds once its owner reached its end: the
// callback on a lent scheduler's end is taken back, and the handlers'
// context is done.
func (e *engine[T]) end() {
	if e.unwatch != nil {
		e.unwatch()
	}
	e.cancel(ErrStopped)
}
