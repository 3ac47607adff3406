package dispatch

import (
	"context"

	lc "github.com/aggflow/aggflow/internal/lifecycle"
)

// Lifecycle is the state machine of a Component, the one Dispatcher,
// MainDispatcher and Runtime run on, for components outside this module (a
// broker binding, a user's own): the state (NEW -> PREPARED -> RUNNING ->
// STOPPING -> STOPPED, forward only), the forced flag, the first error, and
// two ends. The logical end is StateStopped: nothing more is admitted or
// handled. The physical end is Done: the logical end reached and every hold
// given back, a hold standing for a goroutine or a call into foreign code
// the component must wait for. The lifecycle of Wow's AggregateDispatcher
// (its lifecycleMonitor), as docs/lifecycle.md describes it.
//
// Hold it as a named field, not embedded, so that its transitions are not
// the component's API, and call Init before sharing the component. Its zero
// value is not usable, and it must not be copied after Init.
//
// Every method is safe for concurrent use and returns without waiting,
// except Await. The lock is held only across the few fields it guards:
// no method calls foreign code with it held, and the finalizer runs after it
// is released, once.
type Lifecycle struct {
	core lc.Core
}

// Init readies l for a component of kind ("consumer") named name, in
// StateNew. The refusals of Step, Enter and Refuse wrap ErrIllegalState and,
// when illegal is not nil, illegal too (the component's own sentinel, so
// that its users compare with their package's). final, if not nil, runs
// once, at the physical end, outside the lock, before Done closes: on the
// goroutine that reached it (the one that gave the last hold back, or a
// stop with none left). It is the place to release what the component owns;
// it must not wait for the component's Done.
func (l *Lifecycle) Init(kind, name string, illegal error, final func()) {
	sentinel := ErrIllegalState
	if illegal != nil {
		sentinel = refusal{illegal}
	}
	l.core.Init(kind, name, lc.New, sentinel, final)
}

// refusal is an illegal-state error of another package: its message is the
// component's sentinel's, and it is both that sentinel and ErrIllegalState.
type refusal struct{ own error }

func (r refusal) Error() string   { return r.own.Error() }
func (r refusal) Unwrap() []error { return []error{r.own, ErrIllegalState} }

// State returns the current state.
func (l *Lifecycle) State() State { return l.core.State() }

// Forced reports whether a force stop began (Force was called).
func (l *Lifecycle) Forced() bool { return l.core.Forced() }

// Done is closed at the physical end: the state is StateStopped and every
// hold was given back. Component.Done returns it.
func (l *Lifecycle) Done() <-chan struct{} { return l.core.Done() }

// Err returns the first error recorded, nil if none. Component.Err returns
// it.
func (l *Lifecycle) Err() error { return l.core.Err() }

// Record keeps err as Err unless an error was recorded before; nil is
// ignored. It changes no state: to stop as well, call Quiesce.
func (l *Lifecycle) Record(err error) { l.core.Record(err) }

// Refuse returns the error of op ("start") refused in the current state: it
// wraps ErrIllegalState (and Init's sentinel) and names the component and
// the state.
func (l *Lifecycle) Refuse(op string) error { return l.core.Refuse(op) }

// Step begins op, a step that must not overlap itself (Prepare, Start), if
// the state is from and no force began; otherwise, or while another Step has
// not left, it returns a refusal (Refuse's). It takes a hold: the caller then
// works outside the lock (into foreign code if it must), moves on with
// Advance, and ends with Leave, always.
func (l *Lifecycle) Step(op string, from State) error { return l.core.Step(op, from) }

// Leave ends what Step began: it gives the hold back (the last one after the
// logical end runs the finalizer and closes Done) and lets the next Step go.
func (l *Lifecycle) Leave() { l.core.Leave() }

// Enter takes a hold for op if the state is from and no force began, else
// it returns the refusal. Unlike Step, calls may overlap: a call made while
// running (a revocation) that the physical end must wait for. End it with
// Release.
func (l *Lifecycle) Enter(op string, from State) error { return l.core.Enter(op, from) }

// Advance moves the state from from to to and reports whether it did: false
// when the state is no longer from or a force began (a stop came first; the
// caller undoes what it made, or leaves it to the finalizer).
func (l *Lifecycle) Advance(from, to State) bool { return l.core.Advance(from, to) }

// Hold takes a hold, for a goroutine about to start, unless the physical end
// was reached; it reports whether it took one. A hold taken, Done waits
// for its Release.
func (l *Lifecycle) Hold() bool { return l.core.Hold() }

// Release gives a hold back; the last one after the logical end runs the
// finalizer and closes Done.
func (l *Lifecycle) Release() { l.core.Release() }

// Quiesce begins a graceful stop: NEW, PREPARED and RUNNING move to
// STOPPING. It returns the state it left and whether this call began the
// stop (false when a stop had begun before), so that the caller closes its
// intake once; from NEW or PREPARED, where nothing runs, the caller ends
// with Stop.
func (l *Lifecycle) Quiesce() (from State, first bool) { return l.core.Quiesce() }

// Force begins a force stop: the state moves to STOPPED at once (the
// logical end; Done still waits for the holds), Forced reports true, and
// nothing graceful starts any more (Step, Enter and Advance refuse). It
// returns the state it left and whether this call was the first force, so
// that the caller cancels what runs once. It takes over a graceful stop in
// progress.
func (l *Lifecycle) Force() (from State, first bool) { return l.core.Force() }

// Stop reaches the logical end, from any state: the state moves to
// STOPPED; once no hold is left, the finalizer runs and Done closes. Call
// it when the last work of a stop ended, or when a stop found nothing
// running.
func (l *Lifecycle) Stop() { l.core.Stop() }

// Await waits for the physical end, then returns Err; or for ctx to end
// first, then returns ctx's error, or what onTimeout makes of it when not nil
// (name what is still running; wrap the error given). Termination wins when
// both happened. It is StopGracefully's wait.
func (l *Lifecycle) Await(ctx context.Context, onTimeout func(error) error) error {
	return l.core.Await(ctx, onTimeout)
}
