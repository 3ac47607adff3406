package dispatch

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
)

// enumName returns names[e], or "Type(e)" for a value out of range.
func enumName[E ~int | ~int32](e E, typ string, names ...string) string {
	if e >= 0 && int(e) < len(names) {
		return names[e]
	}
	return typ + "(" + strconv.Itoa(int(e)) + ")"
}

// Outcome is how an exchange ended: handled with success, an error, a panic
// (told apart from an error) or a cancellation; OutcomeDiscarded is an
// exchange dropped without being handled.
type Outcome int32

const (
	// OutcomeSuccess: the handler returned nil.
	OutcomeSuccess Outcome = iota
	// OutcomeError: the handler returned an error, or the exchange was refused
	// before reaching a handler (ErrInvalidGroupKey).
	OutcomeError
	// OutcomePanic: the handler (or the WithContextOf function) panicked; the
	// error is a *PanicError.
	OutcomePanic
	// OutcomeCancelled: the handler returned an error after ForceStop had
	// cancelled its context. A handler that returns nil after the
	// cancellation finished its work: OutcomeSuccess.
	OutcomeCancelled
	// OutcomeDiscarded: dropped without being handled; the error is the
	// reason (see WithDiscardHook). Only Result carries it: Observer has
	// Discarded.
	OutcomeDiscarded
)

// String returns the lower-case metric tag value ("success").
func (o Outcome) String() string {
	return enumName(o, "Outcome", "success", "error", "panic", "cancelled", "discarded")
}

// Stats is a snapshot of a dispatcher's counters, in exchanges. At every
// instant Received == Succeeded + Failed + Discarded + InFlight, and after
// Done() is closed InFlight == 0. Every exchange pulled from the source is
// counted in Received exactly once and ends exactly once in one of the three
// final counters. Failed counts OutcomeError, OutcomePanic and
// OutcomeCancelled. InFlight counts the exchanges admitted and not ended
// plus the one the source's goroutine may be refusing or failing at that
// moment: at most the pending budget + 1. An exchange the source's
// goroutine holds while it waits for room is received once it is admitted
// or refused. A dispatcher's Stats reads the counters as
// one snapshot (they held together at one moment during the call).
type Stats struct {
	Received, Succeeded, Failed, Discarded, InFlight int64
}

// Labels say where an event comes from: the dispatcher and the named
// aggregate. Both have a bounded number of values, so they are safe as
// metric labels; the aggregate id and the group, unbounded, never are, and
// appear only in Result, logs and spans. Labels is comparable: a map key.
type Labels struct {
	// Dispatcher is the dispatcher's name; for a child of a MainDispatcher,
	// "<main>-<aggregate>", the name it would have on its own.
	Dispatcher string
	// Aggregate is the named aggregate of the exchange's lanes; zero for an
	// exchange of a MainDispatcher that matched none.
	Aggregate aggregate.MaterializedNamedAggregate
}

// Observer sees every exchange of a dispatcher: the metrics seam, which
// observe/prommetrics and observe/otelmetrics implement. Every method
// gets the Labels of the exchange's dispatcher and named aggregate and a
// ctx: for Started and Finished the handler's (see WithContextOf), for
// Admitted and Discarded the dispatcher's (Prepare's values). Methods are
// called concurrently from many goroutines, inline on the hot path: they
// must be fast and must not block. A panic of a method is recovered and
// logged; the exchange is accounted for as if the method had returned.
// Discarded runs on a goroutine of its own that the discarding waits for
// (with the outcome and discard hooks), so that even a runtime.Goexit in it
// leaves the rest of a stop's discarding to go on.
// Several observers compose: WithObserver may be given more than once.
type Observer interface {
	// Admitted is called once per exchange accepted into a group.
	Admitted(ctx context.Context, l Labels)
	// Started is called when the handler is about to run, with the time the
	// exchange waited since admission.
	Started(ctx context.Context, l Labels, queueWait time.Duration)
	// Finished is called once per exchange that ended with an outcome, with the
	// handler's running time (0 for an exchange refused before a handler) and
	// its error (nil on success).
	Finished(ctx context.Context, l Labels, o Outcome, handling time.Duration, err error)
	// Discarded is called once per exchange received and dropped without
	// being handled: admitted ones, and ones refused at the intake. The
	// reason wraps ErrForceStopped (dropped by ForceStop), ErrStopped (emitted
	// by the source after the intake closed), ErrUnknownAggregate (a
	// MainDispatcher has no lanes for its named aggregate), or
	// schedulers.ErrRejected (the scheduler refused or ended under the
	// dispatcher).
	Discarded(ctx context.Context, l Labels, reason error)
}

// observers is the Observer of several, called in the order given.
type observers []Observer

func (os observers) Admitted(ctx context.Context, l Labels) {
	for _, o := range os {
		o.Admitted(ctx, l)
	}
}

func (os observers) Started(ctx context.Context, l Labels, wait time.Duration) {
	for _, o := range os {
		o.Started(ctx, l, wait)
	}
}

func (os observers) Finished(ctx context.Context, l Labels, oc Outcome, took time.Duration, err error) {
	for _, o := range os {
		o.Finished(ctx, l, oc, took, err)
	}
}

func (os observers) Discarded(ctx context.Context, l Labels, reason error) {
	for _, o := range os {
		o.Discarded(ctx, l, reason)
	}
}

// guardedObserver recovers a panic of the Observer it wraps, so that user
// code never breaks a dispatcher nor loses an exchange: the accounting goes
// on as if the call had returned. Each method has a single deferred call,
// which the compiler open-codes: no cost without a panic.
type guardedObserver struct {
	obs Observer
	g   *guardian
}

// guard returns one Observer of obs, each guarded, or nil for none.
func guard(obs []Observer, logger *slog.Logger, name string) Observer {
	var gs observers
	for _, o := range obs {
		gs = append(gs, guardedObserver{obs: o, g: newGuardian(logger, name, "observer")})
	}
	switch len(gs) {
	case 0:
		return nil
	case 1:
		return gs[0]
	}
	return gs
}

func (g guardedObserver) Admitted(ctx context.Context, l Labels) {
	var p error
	defer g.g.recovered("Admitted", &p)
	defer component.Catch(&p)
	g.obs.Admitted(ctx, l)
}

func (g guardedObserver) Started(ctx context.Context, l Labels, wait time.Duration) {
	var p error
	defer g.g.recovered("Started", &p)
	defer component.Catch(&p)
	g.obs.Started(ctx, l, wait)
}

func (g guardedObserver) Finished(ctx context.Context, l Labels, o Outcome, took time.Duration, err error) {
	var p error
	defer g.g.recovered("Finished", &p)
	defer component.Catch(&p)
	g.obs.Finished(ctx, l, o, took, err)
}

func (g guardedObserver) Discarded(ctx context.Context, l Labels, reason error) {
	var p error
	defer g.g.recovered("Discarded", &p)
	defer component.Catch(&p)
	g.obs.Discarded(ctx, l, reason)
}

// guardian logs the panics of one piece of user code called per exchange
// (an observer, a hook). The first panic is logged with its stack; later
// ones are only counted, and logged without a stack once per 1024, so that
// broken user code costs a recover, not a stack capture, per exchange.
type guardian struct {
	logger     *slog.Logger
	name, what string
	panics     atomic.Int64
}

func newGuardian(logger *slog.Logger, name, what string) *guardian {
	return &guardian{logger: logger, name: name, what: what}
}

// recovered is deferred by each guarded call before component.Catch(p),
// which recovers: it reports the panic Catch put in *p.
func (g *guardian) recovered(method string, p *error) {
	if pe, ok := (*p).(*PanicError); ok {
		g.report(method, pe)
	}
}

// report logs a panic p of method: the first, then one in 1024.
func (g *guardian) report(method string, p *PanicError) {
	switch n := g.panics.Add(1); {
	case n == 1:
		g.logger.Error("dispatch: "+g.what+" panicked", slog.String("dispatcher", g.name),
			slog.String("method", method), slog.Any("error", p))
	case n%1024 == 0:
		g.logger.Error("dispatch: "+g.what+" keeps panicking", slog.String("dispatcher", g.name),
			slog.String("method", method), slog.Any("panic", p.Value), slog.Int64("panics", n))
	}
}
