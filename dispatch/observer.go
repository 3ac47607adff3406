package dispatch

import (
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/internal/panics"
)

// enumName returns names[e], or "Type(e)" for a value out of range.
func enumName[E ~int | ~int32](e E, typ string, names ...string) string {
	if e >= 0 && int(e) < len(names) {
		return names[e]
	}
	return typ + "(" + strconv.Itoa(int(e)) + ")"
}

// Outcome is how a handled exchange ended. It mirrors the outcome tag of Wow's
// wow.operation timer (AggregateDispatcher.kt, WowMetrics.kt), with panics
// told apart from errors.
type Outcome int32

const (
	// OutcomeSuccess: the handler returned nil.
	OutcomeSuccess Outcome = iota
	// OutcomeError: the handler returned an error, or the exchange was refused
	// before reaching a handler (ErrInvalidGroupKey).
	OutcomeError
	// OutcomePanic: the handler panicked; the error is a *PanicError.
	OutcomePanic
	// OutcomeCancelled: the handler returned an error after ForceStop had
	// cancelled its context. A handler that returns nil after the
	// cancellation finished its work: OutcomeSuccess.
	OutcomeCancelled
)

// String returns the lower-case metric tag value ("success").
func (o Outcome) String() string {
	return enumName(o, "Outcome", "success", "error", "panic", "cancelled")
}

// Stats is a snapshot of a dispatcher's counters, in exchanges. At every
// instant Received == Succeeded + Failed + Discarded + InFlight, and after
// Done() is closed InFlight == 0. Every exchange pulled from the source is
// counted in Received exactly once and ends exactly once in one of the three
// final counters. Failed counts OutcomeError, OutcomePanic and
// OutcomeCancelled.
type Stats struct {
	Received, Succeeded, Failed, Discarded, InFlight int64
}

// Observer sees every exchange of a dispatcher: the metrics seam (Wow's
// WowMetrics / wow.operation timer, reduced to an interface). Its methods are
// called concurrently from many goroutines, inline on the hot path: they must
// be fast and must not block. The group key is never passed, so that metric
// cardinality stays bounded (Wow AD-25). A panic of a method is recovered
// and logged; the exchange is accounted for as if the method had returned.
type Observer interface {
	// Admitted is called once per exchange accepted into a group.
	Admitted()
	// Started is called when the handler is about to run, with the time the
	// exchange waited since admission.
	Started(queueWait time.Duration)
	// Finished is called once per exchange that ended with an outcome, with the
	// handler's running time (0 for an exchange refused before a handler) and
	// its error (nil on success).
	Finished(o Outcome, handling time.Duration, err error)
	// Discarded is called once per exchange received and dropped without
	// being handled: admitted ones, and ones refused at the intake. The
	// reason wraps ErrForceStopped (dropped by ForceStop), ErrStopped (emitted
	// by the source after the intake closed), ErrUnknownAggregate (a
	// MainDispatcher has no lanes for its named aggregate), or
	// schedulers.ErrRejected (the scheduler refused or ended under the
	// dispatcher).
	Discarded(reason error)
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) Admitted()                              {}
func (nopObserver) Started(time.Duration)                  {}
func (nopObserver) Finished(Outcome, time.Duration, error) {}
func (nopObserver) Discarded(error)                        {}

// guardedObserver recovers a panic of the Observer it wraps, so that user
// code never breaks a dispatcher nor loses an exchange: the accounting goes
// on as if the call had returned. The first panic is logged with its stack;
// later ones are only counted, and logged without a stack once per 1024, so
// that a broken Observer costs a recover, not a stack capture, per exchange.
// Each method has a single deferred call, which the compiler open-codes: no
// cost without a panic.
type guardedObserver struct {
	obs    Observer
	logger *slog.Logger
	name   string
	panics *atomic.Int64
}

// guard wraps obs, except the default one, which cannot panic.
func guard(obs Observer, logger *slog.Logger, name string) Observer {
	if obs == Observer(nopObserver{}) {
		return obs
	}
	return guardedObserver{obs: obs, logger: logger, name: name, panics: new(atomic.Int64)}
}

func (g guardedObserver) Admitted() {
	defer g.recovered("Admitted")
	g.obs.Admitted()
}

func (g guardedObserver) Started(wait time.Duration) {
	defer g.recovered("Started")
	g.obs.Started(wait)
}

func (g guardedObserver) Finished(o Outcome, took time.Duration, err error) {
	defer g.recovered("Finished")
	g.obs.Finished(o, took, err)
}

func (g guardedObserver) Discarded(reason error) {
	defer g.recovered("Discarded")
	g.obs.Discarded(reason)
}

// recovered is deferred by each method: it must call recover itself.
func (g guardedObserver) recovered(method string) {
	v := recover()
	if v == nil {
		return
	}
	switch n := g.panics.Add(1); {
	case n == 1:
		g.logger.Error("dispatch: observer panicked", slog.String("dispatcher", g.name),
			slog.String("method", method), slog.Any("error", panics.New(v)))
	case n%1024 == 0:
		g.logger.Error("dispatch: observer keeps panicking", slog.String("dispatcher", g.name),
			slog.String("method", method), slog.Any("panic", v), slog.Int64("panics", n))
	}
}
