package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// intake is what Dispatcher and MainDispatcher share: the lifecycle, one
// flow, the engines it feeds (one per named aggregate), the source and the
// goroutine that runs it. The intake runs on the source's goroutine (or on
// Emit's caller): gate, route, budget, lane; no hop in between.
type intake[T any] struct {
	life     component.Lifecycle // a named field: its transitions are not the user's
	f        *flow
	engines  []*engine[T]
	report   *engine[T]                                                      // reports what fails or is refused before a lane
	route    func(T) (e *engine[T], group int, key aggregate.Key, err error) // runs user code: its panics are emit's and Emit's to recover
	keyFn    string                                                          // what computes the key, for errors: "AggregateID", "AggregateKey" or "key function"
	emitFn   func(T) error                                                   // the source's emit when not the route's (New's: emitByID)
	batching bool                                                            // emitBatch runs: admit stages, flush publishes
	staging  staging[T]                                                      // the source's batch, staged
	runs     sync.Pool                                                       // *staging[T] for EmitBatch's runs
	source   Source[T]                                                       // nil: Emit feeds the intake
	emitMu   sync.Mutex
	timeout  time.Duration
	ends     []func() // WithResults' completions

	sourceRunning atomic.Bool // the source's Subscribe has not returned
	prepared      atomic.Bool // Prepare made the contexts
	credit        int64       // budget units the source's goroutine took ahead
	handed        bool        // the source's goroutine handed an exchange on after a graceful stop
	failing       atomic.Bool // a failure stops the intake: nothing is handed on

	// set by Prepare, read after it
	owned     schedulers.Scheduler // a scheduler made and owned, if any
	srcCtx    context.Context
	srcCancel context.CancelCauseFunc
}

func (in *intake[T]) init(kind, name string, source Source[T], cfg *config[T], engines []*engine[T], report *engine[T]) {
	in.source, in.engines, in.report, in.timeout, in.ends = source, engines, report, cfg.stopTimeout, cfg.ends
	in.f = newFlow(cfg.maxPending, in.life.Stop)
	in.f.queued = in.queued
	for _, e := range in.all() {
		e.f, e.onFail, e.onRetire = in.f, in.fail, in.retire
	}
	in.life.Init(kind, name, errIllegal, in.end)
}

// queued is the flow's count of the exchanges published into the lanes of
// every engine.
func (in *intake[T]) queued() int64 {
	var n int64
	for _, e := range in.engines {
		n += e.queued()
	}
	return n
}

// all returns the engines and the reporting one, each once.
func (in *intake[T]) all() []*engine[T] {
	if slices.Contains(in.engines, in.report) {
		return in.engines
	}
	return append(slices.Clip(in.engines), in.report)
}

// Name returns the name given to the constructor.
func (in *intake[T]) Name() string { return in.life.Name() }

// State returns the current lifecycle state.
func (in *intake[T]) State() component.State { return in.life.State() }

// Done is closed once the dispatcher stopped and every goroutine it owns
// exited: its source's, an owned scheduler's, and every handler returned.
func (in *intake[T]) Done() <-chan struct{} { return in.life.Done() }

// Err returns the first failure: the source's error, a scheduler that
// refused work, or the first handler failure under StopOnError.
// Meaningful once Done is closed.
func (in *intake[T]) Err() error { return in.life.Err() }

// Stats returns the counters. The identity Received == Succeeded + Failed +
// Discarded + InFlight holds in every snapshot; InFlight is 0 once Done is
// closed.
func (in *intake[T]) Stats() Stats { return in.f.snapshot() }

// Budget returns the pending budget (WithMaxPending): the units in use
// (the exchanges admitted and not finished, plus those the source's
// goroutine took ahead, at most 32) and the limit. Two atomic loads; for
// gauges.
func (in *intake[T]) Budget() (pending, max int64) {
	return in.f.budget.pending.Load(), in.f.budget.max
}

// prepare is Prepare's skeleton: resolve (outside any lock: it may call a
// supplier) gives each engine its scheduler, and may return one scheduler
// the intake owns.
func (in *intake[T]) prepare(ctx context.Context, resolve func() (owned schedulers.Scheduler, err error)) error {
	if err := in.life.Step("prepare", component.StateNew); err != nil {
		return err
	}
	defer in.life.Leave()
	owned, err := resolve()
	if err != nil {
		return naming(in.life.Kind(), in.Name(), err)
	}
	in.owned = owned
	base := component.Mark(context.WithoutCancel(ctx), in)
	for _, e := range in.all() {
		e.ctx, e.cancel = context.WithCancelCause(base)
	}
	in.srcCtx, in.srcCancel = context.WithCancelCause(flux.WithDiscard(base, in.sourceDropped))
	in.prepared.Store(true)                                            // publishes the contexts to the stops
	if !in.life.Advance(component.StateNew, component.StatePrepared) { // end disposes what was made
		return fmt.Errorf("%w: %s %q was stopped while preparing", ErrStopped, in.life.Kind(), in.Name())
	}
	return nil
}

// getScheduler asks a supplier (foreign code) for a scheduler, recovering
// its panic.
func getScheduler(s aggregate.SchedulerSupplier, named aggregate.NamedAggregate) (sched schedulers.Scheduler, err error) {
	err = component.Call(func() error {
		sched, err = s.GetOrInitialize(named)
		return err
	}, nil)
	if err == nil && sched == nil {
		err = errors.New("supplier returned a nil scheduler")
	}
	return sched, err
}

// Start opens the intake: the source is subscribed on a goroutine the
// dispatcher owns (or Emit is accepted) and exchanges flow. From
// component.StatePrepared it moves to component.StateRunning; it is a no-op when running, and
// returns ErrIllegalState from component.StateNew, component.StateStopping and component.StateStopped (a
// dispatcher does not restart: a Start after a stop would otherwise look
// like a start that admitted nothing).
func (in *intake[T]) Start() error {
	if !in.life.Hold() {
		return in.life.Refuse("start") // stopped and done
	}
	if !in.life.Advance(component.StatePrepared, component.StateRunning) {
		defer in.life.Release()
		if in.State() == component.StateRunning {
			return nil
		}
		return in.life.Refuse("start")
	}
	defer in.life.Release() // the goroutines hold their own
	for _, e := range in.engines {
		if e.sched == in.owned {
			continue // only the intake disposes an owned scheduler
		}
		e.watch(&in.life)
	}
	in.f.waitSource.Store(in.source != nil) // before a stop can look: the source is subscribed next
	in.life.Go("source", in.own)
	return nil
}

// own is the intake's goroutine: it runs the source, then waits until every
// admitted exchange ended and disposes an owned scheduler, however the
// source ended (runSource says how).
func (in *intake[T]) own() error {
	defer in.finish()
	if in.source != nil {
		in.subscribe()
	}
	return nil
}

// finish waits until every admitted exchange ended, then disposes an owned
// scheduler and waits for its goroutines.
func (in *intake[T]) finish() {
	<-in.f.drained
	if in.owned == nil {
		return
	}
	if in.life.Forced() {
		in.owned.Dispose()
	} else {
		_ = in.owned.DisposeGracefully(context.Background()) // nothing is queued any more
	}
	<-in.owned.Done()
}

// subscribe runs the source into the intake; its end, normal or not, shuts
// the intake. A source error is Err() and the admitted exchanges drain.
func (in *intake[T]) subscribe() {
	in.sourceRunning.Store(true)
	err := in.runSource()
	if err != nil && in.srcCtx.Err() == nil && !in.f.shut.Load() { // after a stop, the source's end is completion
		in.life.Record(fmt.Errorf("dispatch: %s %q: source failed: %w", in.life.Kind(), in.Name(), err))
	}
	in.sourceDone()
}

// sourceDone records that the source returned, gives its budget units
// back and shuts the intake.
func (in *intake[T]) sourceDone() {
	in.f.budget.release(in.credit)
	in.credit = 0
	in.sourceRunning.Store(false)
	in.f.waitSource.Store(false)
	in.closeIntake()
}

// runSource subscribes the source, recovering a panic that escaped it. A
// source that ends its goroutine with runtime.Goexit (a handler's, on
// schedulers.Immediate) is an error: the intake shuts and the rest drains
// as after a source error, before the goroutine unwinds through own.
func (in *intake[T]) runSource() error {
	if in.emitFn == nil {
		in.emitFn = in.emit
	}
	subscribe := func() error { return in.source.Subscribe(in.srcCtx, in.emitFn) }
	if b, ok := in.source.(batchSource[T]); ok && b.subscribe != nil {
		subscribe = func() error { return b.subscribe(in.srcCtx, in.emitBatch) }
	}
	return component.Call(subscribe, func(p *PanicError) {
		in.life.Record(fmt.Errorf("dispatch: %s %q: source: %w", in.life.Kind(), in.Name(), p))
		in.sourceDone()
	})
}

// opened reports whether the intake takes x, and whether it is shut (then
// only the item handed on is taken); a refused x is counted and discarded.
func (in *intake[T]) opened(x T) (afterStop, open bool) {
	afterStop = in.f.shut.Load() // no fence before the count: the drain waits for the source (see flow)
	if afterStop && !in.handOn() {
		in.refuse(x)
		return true, false
	}
	return afterStop, true
}

// emit is the intake on the source's goroutine. Every exchange the source
// emits is accounted for: admitted, failed (no route) or discarded (after
// the intake shut, or for an unknown aggregate); the first one after a
// graceful stop is handed on (handOn).
func (in *intake[T]) emit(x T) (err error) {
	afterStop, open := in.opened(x)
	if !open {
		return errIntakeClosed
	}
	stage := keying
	var p *PanicError
	defer in.unwound(&stage, &x, &err, &p)
	defer component.RecoverAt(&stage, keying, &p) // the route's user code
	e, g, k, rerr := in.route(x)
	if rerr != nil {
		stage = settled
		in.unrouted(x, rerr)
		return nil
	}
	return in.admit(e, g, k, &x, afterStop, &stage)
}

// emitByID returns emit for New's exchanges, routed by routeByID without
// the route's indirect call: the source's emit. It is the function the
// source calls, so that the exchange, passed in registers, is not copied
// on the way.
func emitByID[T aggregate.IDCapable](in *intake[T], e *engine[T], key func(T) aggregate.Key) func(T) error {
	return func(x T) (err error) {
		afterStop, open := in.opened(x)
		if !open {
			return errIntakeClosed
		}
		stage := keying
		var p *PanicError
		defer in.unwound(&stage, &x, &err, &p)
		defer component.RecoverAt(&stage, keying, &p) // AggregateID or AggregateKey
		g, k, rerr := routeByID(in.Name(), x, key, e.groups)
		if rerr != nil {
			stage = settled
			in.unrouted(x, rerr)
			return nil
		}
		return in.admit(e, g, k, &x, afterStop, &stage)
	}
}

// refuse counts and discards an exchange the intake does not admit, with
// the intake's refusal.
func (in *intake[T]) refuse(x T) {
	in.f.aside.Add(1)
	in.report.dropped(x, 0, -1, in.refusal())
	in.f.check()
}

// admit puts a routed exchange (to e's group g, id's lane under
// WithKeyOrdering) into its lane, taking a budget unit from the credit.
// Source's goroutine only; *stage is emit's.
func (in *intake[T]) admit(e *engine[T], g int, k aggregate.Key, x *T, afterStop bool, stage *intakeStage) error {
	*stage = admitting
	if in.credit == 0 {
		n, err := in.credits(afterStop)
		if err != nil {
			*stage = settled
			in.refuse(*x)
			return err
		}
		in.credit = n
	}
	e.admitted()
	if in.batching {
		in.staging.stage(e, g, k, x) // counted at its publication, by flush
		*stage = settled
		in.credit--
		return nil
	}
	l, late, kick := e.enqueue(g, k, x) // counts x: its publication
	*stage = settled
	in.credit--
	if late != nil {
		e.schedule(late)
	}
	if kick {
		e.schedule(l)
	}
	return nil
}

// handOn reports whether the source's exchange, counted and met by a
// graceful stop (the intake shut, or its budget wait cut by the shut, the
// source not returned), is admitted all the same: the first such one is
// the item the source had taken, from a user's channel say, before it saw
// its context end, and a graceful stop must not discard it. The ones after
// it are refused, and so is every one after a failure stopped the intake
// (StopOnError, a scheduler's end): nothing is handled after the failure.
// Source's goroutine only.
func (in *intake[T]) handOn() bool {
	if in.handed || in.f.forced.Load() || in.failing.Load() || !in.sourceRunning.Load() || !in.f.beforeDrain() {
		return false
	}
	in.handed = true
	return true
}

// credits takes budget units for the source's goroutine: up to a batch
// while the intake is open; one for the exchange handed on after a
// graceful stop, waiting for room until a force.
func (in *intake[T]) credits(late bool) (int64, error) {
	if !in.staging.empty() {
		want := int64(creditBatch)
		if late {
			want = 1
		}
		if n := in.f.budget.tryTakeUpTo(want); n > 0 {
			return n, nil
		}
		in.flush() // the staged exchanges hold units: the consumers see them before the wait
	}
	if !late {
		n, err := in.f.budget.acquireUpTo(in.srcCtx, in.f.shutCh, creditBatch)
		if err == nil || !in.handOn() {
			return n, err
		}
	}
	return in.f.budget.acquireUpTo(in.report.ctx, nil, 1)
}

// sourceDropped is the flux discard hook of the source's context: an
// exchange a flux source's operator dropped (a PublishOn's queue when the
// intake closed) is counted and discarded, with the intake's refusal once
// it shut, else with the flux's reason.
func (in *intake[T]) sourceDropped(x T, reason error) {
	f := in.f
	f.aside.Add(1)
	if f.shut.Load() {
		reason = in.refusal()
	}
	in.report.dropped(x, 0, -1, reason)
	f.check()
}

// intakeStage is how far the intake got with an exchange, for the deferred
// call that ends it when user code on the way does not return.
type intakeStage uint8

const (
	keying    intakeStage = iota // the route's user code runs (AggregateID, the key function)
	admitting                    // routed; Observer.Admitted may run
	settled                      // in its lane, or accounted for
)

// unwound, deferred by emit, ends x when what emit calls before x is in its
// lane did not return. A panic of the route's user code fails x alone with
// ErrInvalidGroupKey, and emit returns nil to the source, which goes on.
// runtime.Goexit (which no recover stops), there or in Observer.Admitted,
// fails x as OutcomePanic before the goroutine unwinds: x was received, so
// it must end; its budget unit was not taken from the credit, which the
// source's end gives back. *p is the route's panic RecoverAt recovered.
func (in *intake[T]) unwound(stage *intakeStage, x *T, err *error, p **PanicError) {
	switch {
	case *stage == settled:
		return
	case *p != nil:
		*err = nil
		in.unrouted(*x, in.keyPanicked(*p))
		return
	}
	defer in.f.check()       // a stop may have come since the gate
	defer in.f.failed.Add(1) // after the report, even when it panics or exits too
	in.f.aside.Add(1)
	in.report.failure(in.report.ctx, *x, 0, -1, OutcomePanic, 0,
		fmt.Errorf("dispatch: %s %q: intake: %w", in.life.Kind(), in.Name(), component.NewPanicError(component.ErrGoexit)))
}

// keyPanicked is the error of an exchange whose route's user code panicked
// (p).
func (in *intake[T]) keyPanicked(p *PanicError) error {
	return fmt.Errorf("%w: %s %q: %s panicked: %w", ErrInvalidGroupKey, in.life.Kind(), in.Name(), in.keyFn, p)
}

// creditBatch is how many budget units the source's goroutine takes at a
// time, so that it touches the budget shared with the consumers once per
// batch rather than once per exchange. Units taken ahead count as pending:
// the bound holds; they go back when the source returns.
const creditBatch = 32

// unrouted counts and accounts for an exchange that has no lane: an unknown
// aggregate is discarded, an invalid key fails.
func (in *intake[T]) unrouted(x T, err error) {
	in.f.aside.Add(1)
	in.accountUnrouted(x, err)
}

// accountUnrouted is unrouted for an exchange already counted.
func (in *intake[T]) accountUnrouted(x T, err error) {
	defer in.f.check() // a stop may have come since the gate
	if errors.Is(err, ErrUnknownAggregate) {
		in.report.dropped(x, 0, -1, err)
	} else {
		defer in.f.failed.Add(1) // after the report, even when it panics (a log handler)
		in.report.failure(in.report.ctx, x, 0, -1, OutcomeError, 0, err)
	}
}

// refusal is the reason given to an exchange refused at the intake.
func (in *intake[T]) refusal() error {
	if in.f.forced.Load() {
		return in.report.forceCause()
	}
	return errIntakeClosed
}

// Emit pushes x on the caller's goroutine, with no hop: the push-style
// intake of a dispatcher built with a nil source. It waits while the
// pending budget is used up (backpressure) or until ctx ends (ctx's cause;
// x is not admitted). Before Start and once the intake shut it returns an
// error wrapping ErrStopped and x is not admitted nor counted. An exchange
// that cannot be routed is counted and fails (or is discarded, for an
// unknown aggregate), and Emit returns nil. Safe for concurrent use:
// concurrent calls are admitted one at a time, so one group's order is the
// order of admission. With a source it returns ErrIllegalState.
func (in *intake[T]) Emit(ctx context.Context, x T) (err error) {
	if err := in.pushable("Emit"); err != nil {
		return err
	}
	f := in.f
	if err := f.budget.acquire(ctx, f.shutCh); err != nil {
		if errors.Is(err, errIntakeClosed) {
			return in.emitRefused()
		}
		return err
	}
	f.emitting.Add(1)
	if f.shut.Load() {
		f.emitting.Add(-1)
		f.budget.release(1)
		f.check()
		return in.emitRefused()
	}
	stage := keying
	var p *PanicError
	defer in.emitUnwound(&stage, &x, &err, &p)
	defer component.RecoverAt(&stage, keying, &p)
	e, g, k, rerr := in.route(x) // user code (AggregateID): outside the lock
	if rerr != nil {
		stage = settled
		in.emitUnrouted(x, rerr)
		return nil
	}
	stage = admitting
	e.admitted()
	stage = settled
	in.emitMu.Lock()                     // held only for the queue write: no user code under it
	l, late, kick := e.enqueue(g, k, &x) // counts x: its publication
	f.emitting.Add(-1)
	in.emitMu.Unlock()
	if f.shut.Load() {
		f.check() // x may have ended already, its check bailing out on this Emit
	}
	if late != nil {
		e.schedule(late)
	}
	if kick {
		e.schedule(l) // outside the lock: on Immediate the handler runs here
	}
	return nil
}

// pushable returns nil when the intake takes pushed exchanges (method is
// the caller's name): it has no source and runs.
func (in *intake[T]) pushable(method string) error {
	if in.source != nil {
		return fmt.Errorf("%w: %s %q has a source: %s is for a nil source", ErrIllegalState, in.life.Kind(), in.Name(), method)
	}
	if st := in.State(); st != component.StateRunning {
		return fmt.Errorf("%w: %s %q is %v", ErrStopped, in.life.Kind(), in.Name(), st)
	}
	return nil
}

// emitUnrouted counts and accounts for an exchange Emit could not route.
func (in *intake[T]) emitUnrouted(x T, err error) {
	f := in.f
	f.aside.Add(1)
	f.emitting.Add(-1)
	f.budget.release(1)
	in.accountUnrouted(x, err)
}

// emitUnwound, deferred by Emit, is unwound's counterpart: a panic of the
// route's user code fails x alone and Emit returns nil; runtime.Goexit
// there or in Observer.Admitted undoes Emit's count and budget unit, since
// x was not admitted, and a stop must not wait for it.
func (in *intake[T]) emitUnwound(stage *intakeStage, x *T, err *error, p **PanicError) {
	switch {
	case *stage == settled:
		return
	case *p != nil:
		*err = nil
		in.emitUnrouted(*x, in.keyPanicked(*p))
		return
	}
	in.f.emitting.Add(-1)
	in.f.budget.release(1)
	in.f.check()
}

// emitRefused is Emit's error once the intake shut.
func (in *intake[T]) emitRefused() error {
	return fmt.Errorf("%w: %s %q: intake closed", ErrStopped, in.life.Kind(), in.Name())
}

// Quiesce shuts the intake at once: the source's context is cancelled (its
// end counts as completion), exchanges it emits from now on are counted and
// discarded with ErrStopped, and the admitted ones drain; then the
// dispatcher stops. The first exchange the source emits after it (the item
// it had taken, from a user's channel say, before it saw its context end)
// is handed on, not discarded: the drain waits for the source to return
// (after a force or a failure too, though nothing is handed on then: the
// source's context is cancelled and its emits are refused); what a flux
// source's operators drop once the intake shut (a PublishOn's queue) is
// counted and discarded with ErrStopped. Prompt, non-blocking, idempotent.
func (in *intake[T]) Quiesce() {
	if _, first := in.life.Quiesce(); first {
		in.closeIntake()
	}
}

// closeIntake shuts the intake and, once Prepare made the contexts, cancels
// the source's: before that, Prepare may still be writing them (under a
// stop that came first), and the source was never subscribed.
func (in *intake[T]) closeIntake() {
	if in.prepared.Load() {
		in.srcCancel(errIntakeClosed)
	}
	in.f.close()
}

// fail is the engines' report of a failure that stops the dispatcher: the
// first handler failure under StopOnError, a scheduler refusing work.
func (in *intake[T]) fail(err error) {
	in.life.Record(err)
	in.stopFailing()
}

// stopFailing stops the intake after a failure: nothing is handed on.
func (in *intake[T]) stopFailing() {
	in.failing.Store(true)
	in.Quiesce()
	in.f.check() // the shut may have come before
}

// retire is an engine's report that its scheduler refused work or ended:
// that named aggregate alone is retired (its exchanges discarded with
// ErrRejected from now on) and err is recorded for Err; the intake stops
// once every named aggregate is retired, so that in a MainDispatcher the
// others go on and the source is not cut.
func (in *intake[T]) retire(err error) {
	in.life.Record(err)
	for _, e := range in.engines {
		if !e.retired.Load() {
			return
		}
	}
	in.stopFailing()
}

// end runs at the physical end: the engines release their contexts, and an
// owned scheduler is disposed (a no-op after finish did; one made by a
// Prepare that a stop overtook, or never started, has no goroutine).
func (in *intake[T]) end() {
	if in.owned != nil {
		in.owned.Dispose()
	}
	for _, e := range in.all() {
		e.end()
	}
	for _, end := range in.ends {
		end()
	}
}

// StopGracefully quiesces, then waits until every admitted exchange ended
// and every goroutine the dispatcher owns exited; it returns nil, or Err().
// If ctx ends first it returns an error wrapping ctx's that names what is
// still running (the groups of running handlers with their aggregate ids,
// the first three and the count of the rest, or a source that ignores its
// context); the draining goes on, and a later call waits again. Called
// with a ctx that comes from the dispatcher's own handlers, it quiesces and
// returns an error wrapping ErrIllegalState at once: a handler cannot wait
// for itself. The handler's ctx is how it is recognised: a handler that
// passes a context of its own (context.Background()) waits until that ends,
// so from a handler call Quiesce, or pass the handler's ctx.
func (in *intake[T]) StopGracefully(ctx context.Context) error {
	in.Quiesce()
	if component.Marked(ctx, in) {
		return fmt.Errorf("%w: %s %q: StopGracefully called from its own handler cannot wait for itself; the stop has begun",
			ErrIllegalState, in.life.Kind(), in.Name())
	}
	return in.life.Await(ctx, in.stillRunning)
}

// stillRunning names what keeps the dispatcher from its end, and which end:
// after the logical one (every exchange ended), it is stopped, not done.
func (in *intake[T]) stillRunning(err error) error {
	return fmt.Errorf("dispatch: %s %q %s: %s: %w", in.life.Kind(), in.Name(), in.life.Unfinished(), in.describe(), err)
}

// describe says what is left.
func (in *intake[T]) describe() string {
	var running, ids []string
	for _, e := range in.engines {
		for _, r := range e.runningLanes() {
			running = append(running, fmt.Sprintf("%s/%d", e.named.Aggregate, r.group))
			if id, ok := e.runningID(r.l); ok { // user code: no lock held
				ids = append(ids, strconv.Quote(id))
			}
		}
	}
	s := in.f.stats()
	switch {
	case len(running) > 0:
		return fmt.Sprintf("%d exchanges in flight, handlers running in groups %v%s", s.InFlight, running, namedIDs(ids))
	case s.InFlight > 0:
		return fmt.Sprintf("%d exchanges in flight", s.InFlight)
	case in.sourceRunning.Load():
		return "every exchange ended, but its source is still running (it ignores its context)"
	}
	return "every exchange ended; its goroutines are exiting"
}

// namedIDs names the aggregate ids of running handlers: the first few and
// the count of the rest.
func namedIDs(ids []string) string {
	const few = 3
	switch {
	case len(ids) == 0:
		return ""
	case len(ids) <= few:
		return " on aggregate ids " + strings.Join(ids, ", ")
	}
	return fmt.Sprintf(" on aggregate ids %s and %d more", strings.Join(ids[:few], ", "), len(ids)-few)
}

// ForceStop shuts the intake, drops the admitted exchanges that have not
// started (each reported to the discard hook and the Observer with
// ErrForceStopped), cancels the handlers' context with cause
// ErrForceStopped, and returns without waiting; Done says when the last
// handler returned and every goroutine exited. Idempotent, safe before
// Prepare and concurrently with any method.
func (in *intake[T]) ForceStop() {
	if _, first := in.life.Force(); !first {
		return
	}
	in.f.forced.Store(true)
	for _, e := range in.engines {
		e.halt.Store(true)
	}
	in.f.gate() // before the cancel: no exchange is admitted into the room the cancelled handlers free
	if in.prepared.Load() {
		for _, e := range in.all() {
			e.cancel(ErrForceStopped)
		}
	}
	in.closeIntake()
	for _, e := range in.engines {
		e.sweep()
	}
}

// errIntakeClosed is the reason given for an exchange a source emits after
// the intake closed: it was refused, not handled.
var errIntakeClosed = fmt.Errorf("%w: intake closed", ErrStopped)
