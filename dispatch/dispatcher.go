package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/internal/panics"
	"github.com/aggflow/aggflow/schedulers"
)

// PanicError is a handler's (or group key function's) recovered panic: the
// panic value and the stack. It is the same type as schedulers.PanicError and
// flux.PanicError.
type PanicError = panics.Error

// Handler handles one exchange. ctx is cancelled, with cause ErrForceStopped,
// by ForceStop. A returned error or a panic is the exchange's failure, handled
// by the ErrorPolicy; it never stops the other exchanges under Continue.
// A handler must not call runtime.Goexit (t.FailNow, require.* in a test's
// handler): nothing can stop it from unwinding the goroutine that runs the
// group, so that exchange fails (OutcomePanic, schedulers.ErrGoexit) and the
// whole pipeline breaks: the admitted exchanges not yet started are
// discarded with the breaking error and Err() reports it.
type Handler[T any] func(ctx context.Context, exchange T) error

// Dispatcher handles the exchanges of one named aggregate, emitted by a
// source flux, so that exchanges of one group are handled one at a time in
// source order while groups run concurrently on the named aggregate's
// scheduler. It is Wow's AggregateDispatcher (AggregateDispatcher.kt); see the
// package documentation for the pipeline and the deviations from Wow.
//
// Ordering contract: the exchanges of one group (one aggregate id always
// falls in the same group) are handled one at a time, in the order the source
// emitted them; the next starts only after the handler of the previous one
// returned. Groups run concurrently, at most the scheduler's parallelism at
// once. Nothing else is ordered: not ids in different groups, not other
// dispatchers, and no group is tied to a goroutine.
//
// Lifecycle: New starts nothing. Prepare resolves the scheduler and
// subscribes the pipeline with its intake closed: nothing is pulled from the
// source before Start. Quiesce closes the intake; the admitted exchanges
// drain. ForceStop drops what has not started and cancels the handlers'
// context. The pipeline ends, and the Dispatcher is StateStopped, when the
// source completes or fails, after Quiesce once drained, or after ForceStop;
// Done is closed when its last goroutine exited. One-shot: no restart.
//
// All methods are safe for concurrent use.
type Dispatcher[T any] struct {
	named   aggregate.MaterializedNamedAggregate
	source  flux.Flux[T]
	handler Handler[T]
	keyOf   func(T) int
	discard func(T, error)
	opts    options

	lifecycle
	timed bool // an Observer wants durations
	taken bool // the last exchange pushed reached the groups (pipeline goroutine only)

	received, succeeded, failed, discardedCnt atomic.Int64
}

// item is an admitted exchange on its way through the groups: a small value,
// no pointer of its own, so that admission does not allocate.
type item[T any] struct {
	x        T
	key      int
	admitted time.Time // zero when no Observer wants queue waits
}

// New returns a Dispatcher named name for the exchanges of named, pulled from
// source and handled by handler. It starts nothing. An empty name or a nil
// handler returns ErrInvalidArgument; a parallelism below 1,
// ErrInvalidParallelism; an invalid option, ErrInvalidOption; an exchange type
// that does not implement aggregate.IDCapable without WithGroupKey,
// ErrNoGroupKey. Wow: AggregateDispatcher's constructor.
func New[T any](name string, named aggregate.NamedAggregate, source flux.Flux[T],
	handler Handler[T], opts ...Option) (*Dispatcher[T], error) {
	o := newOptions(opts)
	switch {
	case name == "" || named == nil || handler == nil:
		return nil, fmt.Errorf("%w: a dispatcher needs a name, a named aggregate and a handler", ErrInvalidArgument)
	case o.parallelism < 1:
		return nil, fmt.Errorf("%w: dispatcher %q: got %d", ErrInvalidParallelism, name, o.parallelism)
	case len(o.invalid) > 0:
		return nil, naming("dispatcher", name, errors.Join(o.invalid...))
	case o.scheduler != nil && o.supplier != nil:
		return nil, fmt.Errorf("%w: dispatcher %q: WithScheduler and WithSchedulerSupplier exclude each other", ErrInvalidOption, name)
	}
	d := &Dispatcher[T]{
		named: aggregate.Materialize(named), source: source, handler: handler, opts: o,
		lifecycle: newLifecycle("dispatcher", name), timed: o.observer != Observer(nopObserver{}),
	}
	d.opts.observer = guard(o.observer, o.logger, name)
	var err error
	if d.keyOf, err = groupKeyOf[T](o); err != nil {
		return nil, naming("dispatcher", name, err)
	}
	if d.discard, err = typed[func(T, error)](o.discardHook, "WithDiscardHook"); err != nil {
		return nil, naming("dispatcher", name, err)
	}
	return d, nil
}

// naming adds the component (kind and name) to one of this package's errors,
// whose message already starts with "dispatch: ", keeping that prefix first.
func naming(kind, name string, err error) error {
	return fmt.Errorf("%w (%s %q)", err, kind, name)
}

// typed returns opt as F: nil when unset, ErrInvalidOption when set for
// another exchange type.
func typed[F any](opt any, option string) (F, error) {
	f, ok := opt.(F)
	if opt != nil && !ok {
		return f, fmt.Errorf("%w: %s is a %T, the dispatcher needs a %v", ErrInvalidOption, option, opt, reflect.TypeFor[F]())
	}
	return f, nil
}

// groupKeyOf returns the key function: WithGroupKey's, or the aggregate id's
// GroupKey when T implements aggregate.IDCapable.
func groupKeyOf[T any](o options) (func(T) int, error) {
	key, err := typed[func(T) int](o.groupKey, "WithGroupKey")
	if err != nil || key != nil {
		return key, err
	}
	if !reflect.TypeFor[T]().Implements(reflect.TypeFor[aggregate.IDCapable]()) {
		return nil, fmt.Errorf("%w: %v does not implement aggregate.IDCapable; use WithGroupKey",
			ErrNoGroupKey, reflect.TypeFor[T]())
	}
	p := o.parallelism
	id := aggregateIDOf[T]()
	return func(x T) int { return id(x).Mod(p) }, nil
}

// aggregateIDOf returns T's AggregateID method as a plain function. For a
// concrete T the method expression is taken once through reflect, so that
// calling it does not box each exchange into an interface (an allocation per
// exchange for value types).
func aggregateIDOf[T any]() func(T) aggregate.ID {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Interface {
		if m, ok := t.MethodByName("AggregateID"); ok {
			if fn, ok := m.Func.Interface().(func(T) aggregate.ID); ok {
				return fn
			}
		}
	}
	return func(x T) aggregate.ID { return any(x).(aggregate.IDCapable).AggregateID() }
}

// Stats returns the counters. Each is read atomically; InFlight is derived
// (Received minus the three final counts, which are read first), so the
// identity Received == Succeeded + Failed + Discarded + InFlight holds in
// every snapshot and InFlight is never negative.
func (d *Dispatcher[T]) Stats() Stats {
	s := Stats{Succeeded: d.succeeded.Load(), Failed: d.failed.Load(), Discarded: d.discardedCnt.Load()}
	s.Received = d.received.Load()
	s.InFlight = s.Received - s.Succeeded - s.Failed - s.Discarded
	return s
}

// Prepare resolves the scheduler and subscribes the pipeline on a goroutine
// the dispatcher owns, with the intake closed: nothing is pulled before
// Start. ctx's values (not its cancellation) reach the source and the
// handlers. It may be called once, from StateNew, else ErrIllegalState;
// an error of the supplier (aggregate.ErrStopped) or of NewParallel is
// returned and the dispatcher stays in StateNew. Wow:
// AggregateDispatcher.prepare (S-1.10.1).
func (d *Dispatcher[T]) Prepare(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != StateNew {
		return d.illegal("prepare")
	}
	sched, owned, err := d.resolveScheduler()
	if err != nil {
		return fmt.Errorf("dispatch: dispatcher %q: %w", d.name, err)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	d.runCancel = cancel
	d.state = StatePrepared
	go d.run(runCtx, sched, owned)
	return nil
}

func (d *Dispatcher[T]) resolveScheduler() (s schedulers.Scheduler, owned bool, err error) {
	switch {
	case d.opts.scheduler != nil:
		return d.opts.scheduler, false, nil
	case d.opts.supplier != nil:
		s, err = d.opts.supplier.GetOrInitialize(d.named)
		return s, false, err
	}
	s, err = schedulers.NewParallel(d.name+"-"+d.named.Aggregate, schedulers.DefaultPoolSize)
	return s, true, err
}

// Start opens the intake: the source is subscribed and exchanges flow. From
// StatePrepared it moves to StateRunning; it is a no-op when running or
// stopped, and returns ErrIllegalState from StateNew and StateStopping. Wow:
// AggregateDispatcher.start.
func (d *Dispatcher[T]) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case StatePrepared:
		d.state = StateRunning
		d.valve.open()
		return nil
	case StateRunning, StateStopped:
		return nil
	}
	return d.illegal("start")
}

// Quiesce closes the intake at once: the source is stopped (its context is
// cancelled and its end counts as completion), exchanges it emits from now on
// are not admitted, and the admitted ones drain; the pipeline then ends. From
// StateNew it goes straight to StateStopped; from StatePrepared the source is
// never subscribed. Prompt, non-blocking, idempotent. Wow:
// AggregateDispatcher.quiesce.
func (d *Dispatcher[T]) Quiesce() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quiesceLocked()
}

func (d *Dispatcher[T]) quiesceLocked() {
	d.valve.shut()
	switch d.state {
	case StateNew:
		d.state = StateStopped
		close(d.done)
	case StatePrepared, StateRunning:
		d.state = StateStopping
	}
}

// StopGracefully quiesces, then waits until the pipeline ended and every
// goroutine exited (nil, or Err() when the pipeline broke), or until ctx
// ends (ctx.Err(); the draining goes on, and a later call waits again). A
// ForceStop meanwhile makes it return once Done is closed. Deviation from
// Wow, whose stopGracefully only waits for a stop begun by quiesce: here it
// begins the stop itself.
func (d *Dispatcher[T]) StopGracefully(ctx context.Context) error {
	d.Quiesce()
	return d.await(ctx)
}

// ForceStop stops the source, drops the admitted exchanges that have not
// started (each reported to the discard hook and the Observer with
// ErrForceStopped), cancels the context of running handlers with cause
// ErrForceStopped, and returns without waiting; Done says when the last
// goroutine exited. Idempotent, safe before Prepare and concurrently with
// any method. Wow: AggregateDispatcher.forceStop.
func (d *Dispatcher[T]) ForceStop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.forced {
		return
	}
	d.forced = true
	d.quiesceLocked()
	d.state = StateStopped
	if d.runCancel != nil {
		d.runCancel(ErrForceStopped)
	}
}

// run is the pipeline goroutine: it subscribes the pipeline and, once that
// ended, disposes an owned scheduler and closes done.
func (d *Dispatcher[T]) run(ctx context.Context, sched schedulers.Scheduler, owned bool) {
	defer close(d.done)
	// After a force every drop is the force's doing, whatever reason the
	// operator that dropped saw first.
	hook := func(it item[T], reason error) { d.dropped(it, causeOr(ctx, reason)) }
	err := d.pipeline(ctx, sched).Subscribe(flux.WithDiscardHook(ctx, hook), func(struct{}) error { return nil })
	d.mu.Lock()
	d.state = StateStopped
	forced := d.forced
	// After a force, a pipeline error is its consequence (a scheduler
	// disposed by its owner right after, for one), not a failure.
	broken := err != nil && !forced
	if broken {
		err = fmt.Errorf("dispatch: dispatcher %q: pipeline broke: %w", d.name, err)
		if d.err == nil {
			d.err = err
		}
	}
	d.mu.Unlock()
	if broken {
		d.opts.logger.Error("dispatch: pipeline failed", slog.String("dispatcher", d.name), slog.Any("error", err))
	}
	if owned {
		if forced {
			sched.Dispose()
			<-sched.Done()
		} else {
			_ = sched.DisposeGracefully(context.Background()) // nothing is queued any more
		}
	}
}

// pipeline assembles source -> intake -> GroupBy -> per group PublishOn ->
// ConcatMap(handle). ctx is the run context, captured by handle so that no
// allocation is needed per exchange to reach it.
func (d *Dispatcher[T]) pipeline(ctx context.Context, sched schedulers.Scheduler) flux.Flux[struct{}] {
	p, buffer := d.opts.parallelism, d.opts.groupBuffer
	handle := func(it item[T]) flux.Flux[struct{}] {
		d.handle(ctx, it)
		return flux.Empty[struct{}]()
	}
	// An exchange counts as received where it is handed to GroupBy, which
	// from there on delivers or discards it: the sink of Create may refuse
	// it first (after a force) without anyone else seeing it.
	admitted := flux.Create(d.intake).DoOnNext(d.admitted)
	groups := flux.GroupBy(admitted, func(it item[T]) int { return it.key }, p, flux.WithGroupBuffer(buffer))
	return flux.FlatMap(groups, func(g flux.GroupedFlux[item[T]]) flux.Flux[struct{}] {
		return flux.ConcatMap(g.PublishOn(sched, buffer), handle)
	}, p)
}

// intake is the gate and admission stage, fused into the source's emit (see
// valve). Every exchange the source emits is accounted for: admitted to the
// groups, failed (invalid key), or discarded (refused after a stop).
func (d *Dispatcher[T]) intake(ctx context.Context, sink flux.Sink[item[T]]) error {
	refused := func(x T) { d.refuse(ctx, x, errIntakeClosed) }
	err := flow(d.valve, ctx, d.source, func(x T) error {
		it, ok := d.admit(x)
		if !ok {
			return nil
		}
		if d.timed {
			it.admitted = time.Now()
		}
		d.taken = false
		err := sink.Next(it)
		if err != nil && !d.taken {
			d.refuse(ctx, x, err) // the sink refused it before the groups saw it
		}
		return err
	}, refused)
	if err != nil && ctx.Err() == nil {
		// The source failed: stop the intake, let the admitted exchanges
		// drain, and report the error as Err().
		d.record(fmt.Errorf("dispatch: dispatcher %q: source failed: %w", d.name, err))
		d.Quiesce()
		return nil
	}
	return err // nil, or the force's cause: the groups learn the reason
}

// refuse accounts for an exchange emitted by the source but not admitted.
func (d *Dispatcher[T]) refuse(ctx context.Context, x T, reason error) {
	d.received.Add(1)
	d.dropped(item[T]{x: x}, causeOr(ctx, reason))
}

// causeOr returns the cause of ctx once it is done, else err.
func causeOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// admit gives x its group; an invalid key fails x, counted as received.
func (d *Dispatcher[T]) admit(x T) (item[T], bool) {
	key, err := d.groupKey(x)
	if err != nil {
		d.received.Add(1)
		d.finish(OutcomeError, 0, err)
		return item[T]{}, false
	}
	return item[T]{x: x, key: key}, true
}

// admitted counts an exchange handed to the groups.
func (d *Dispatcher[T]) admitted(item[T]) {
	d.taken = true
	d.received.Add(1)
	d.opts.observer.Admitted()
}

func (d *Dispatcher[T]) groupKey(x T) (key int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: dispatcher %q: key function panicked: %w", ErrInvalidGroupKey, d.name, panics.New(v))
		}
	}()
	key = d.keyOf(x)
	if key < 0 || key >= d.opts.parallelism {
		return 0, fmt.Errorf("%w: dispatcher %q: key %d not in [0, %d)", ErrInvalidGroupKey, d.name, key, d.opts.parallelism)
	}
	return key, nil
}

// handle runs the handler on one exchange and accounts for its outcome. An
// exchange that reaches it after ForceStop is discarded instead: the group's
// queue may hand out its next exchange before it learns of the force.
func (d *Dispatcher[T]) handle(ctx context.Context, it item[T]) {
	if ctx.Err() != nil {
		d.dropped(it, context.Cause(ctx))
		return
	}
	var start time.Time
	if !it.admitted.IsZero() {
		start = time.Now()
		d.opts.observer.Started(start.Sub(it.admitted))
	}
	err, panicked := d.call(ctx, it.x, start)
	took := since(start)
	switch {
	case err == nil:
		d.finish(OutcomeSuccess, took, nil)
	case panicked:
		d.finish(OutcomePanic, took, err)
	case ctx.Err() != nil:
		d.finish(OutcomeCancelled, took, err)
	default:
		d.finish(OutcomeError, took, err)
	}
}

// since returns the time elapsed since start, 0 when start is zero (no
// Observer wants durations).
func since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}

// call runs the handler, recovering a panic into *PanicError. A handler that
// calls runtime.Goexit (t.FailNow in a test's handler) never returns: the
// exchange is accounted for here as OutcomePanic, with an error wrapping
// schedulers.ErrGoexit, before the goroutine unwinds.
func (d *Dispatcher[T]) call(ctx context.Context, x T, start time.Time) (err error, panicked bool) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			err, panicked = panics.New(v), true
			return
		}
		d.finish(OutcomePanic, since(start), fmt.Errorf("dispatch: dispatcher %q: handler: %w", d.name, panics.New(schedulers.ErrGoexit)))
	}()
	err = d.handler(ctx, x)
	returned = true
	return err, false
}

// finish accounts for an exchange that ended with an outcome.
func (d *Dispatcher[T]) finish(o Outcome, took time.Duration, err error) {
	if o == OutcomeSuccess {
		d.succeeded.Add(1)
	} else {
		d.failed.Add(1)
	}
	d.opts.observer.Finished(o, took, err)
	if err == nil {
		return
	}
	logFailure(d.opts.logger, d.name, o, err)
	if d.opts.policy == StopOnError && o != OutcomeCancelled {
		d.record(err)
		d.Quiesce()
		if d.opts.failed != nil {
			d.opts.failed(err)
		}
	}
}

// logFailure logs the failure of one exchange of dispatcher name.
func logFailure(l *slog.Logger, name string, o Outcome, err error) {
	level := slog.LevelError
	if o == OutcomeCancelled {
		level = slog.LevelWarn // the force's doing, not the handler's
	}
	l.LogAttrs(context.Background(), level, "dispatch: exchange failed",
		slog.String("dispatcher", name), slog.String("outcome", o.String()), slog.Any("error", err))
}

// dropped is the discard hook of the pipeline: an admitted exchange dropped
// without being handled.
func (d *Dispatcher[T]) dropped(it item[T], reason error) {
	d.discardedCnt.Add(1)
	d.opts.observer.Discarded(reason)
	if d.discard != nil {
		d.discard(it.x, reason)
	}
}
