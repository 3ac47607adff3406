package component

import (
	"context"
	"fmt"
	"sync"
)

// Lifecycle is the one state machine behind every long-lived handle of
// aggflow (Dispatcher, MainDispatcher, Runtime, the scheduler supplier, the
// broker bindings' consumers, a user's own component): the state (NEW ->
// PREPARED -> RUNNING -> STOPPING -> STOPPED, forward only), the forced
// flag, the first error, and two ends. The logical end is StateStopped:
// nothing more is admitted or handled. The physical end is Done: the
// logical end reached and every hold given back, a hold standing for a
// goroutine (Go) or a call into foreign code the component must wait for (a
// source, a Prepare in progress). docs/lifecycle.md describes it whole.
//
// Hold it as a named field, not embedded, so that its transitions are not
// the component's API, and call Init before sharing the component. Its zero
// value is not usable, and it must not be copied after Init.
//
// Every method is safe for concurrent use and returns without waiting,
// except Await. The lock is held only across the few fields it guards: no
// method calls foreign code with it held, and the finalizer runs after it is
// released, once.
type Lifecycle struct {
	kind, name string
	illegal    error // wrapped by every refusal, so callers' sentinels apply
	final      func()

	mu      sync.Mutex
	state   State
	forced  bool
	err     error
	holds   int
	busy    bool // a Step has not left yet
	closed  bool
	stopped chan struct{} // closed at the logical end
	done    chan struct{} // closed at the physical end
}

// Init readies l for a component of kind ("consumer") named name, in
// StateNew. The refusals of Step, Enter and Refuse wrap ErrIllegalState
// and, when illegal is not nil, illegal too (the component's own sentinel,
// so that its users compare with their package's; the message is
// illegal's). final, if not nil, runs once, at the physical end, outside
// the lock, before Done closes: on the goroutine that reached it (the one
// that gave the last hold back, or a stop with none left). It is the place
// to release what the component owns; it must not wait for Done.
func (l *Lifecycle) Init(kind, name string, illegal error, final func()) {
	sentinel := ErrIllegalState
	if illegal != nil && illegal != ErrIllegalState {
		sentinel = refusal{illegal}
	}
	l.kind, l.name, l.state, l.illegal, l.final = kind, name, StateNew, sentinel, final
	l.stopped, l.done = make(chan struct{}), make(chan struct{})
}

// refusal is an illegal-state error of another package: its message is the
// component's sentinel's, and it is both that sentinel and ErrIllegalState.
type refusal struct{ own error }

func (r refusal) Error() string   { return r.own.Error() }
func (r refusal) Unwrap() []error { return []error{r.own, ErrIllegalState} }

// Name returns the component's name, as given to Init.
func (l *Lifecycle) Name() string { return l.name }

// Kind returns the component's kind, as given to Init.
func (l *Lifecycle) Kind() string { return l.kind }

// State returns the current state.
func (l *Lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Forced reports whether a force stop began (Force was called).
func (l *Lifecycle) Forced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forced
}

// Done is closed at the physical end: the state is StateStopped and every
// hold was given back. Component.Done returns it.
func (l *Lifecycle) Done() <-chan struct{} { return l.done }

// Stopped is closed at the logical end: the state is StateStopped.
func (l *Lifecycle) Stopped() <-chan struct{} { return l.stopped }

// Err returns the first error recorded, nil if none. Component.Err returns
// it.
func (l *Lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Record keeps err as Err unless an error was recorded before; nil is
// ignored. It changes no state: to stop as well, call Quiesce.
func (l *Lifecycle) Record(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// Refuse returns the error of op ("start") refused in the current state: it
// wraps ErrIllegalState (and Init's sentinel) and names the component and
// the state.
func (l *Lifecycle) Refuse(op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refuseLocked(op)
}

func (l *Lifecycle) refuseLocked(op string) error {
	return fmt.Errorf("%w: %s %q cannot %s from state %v", l.illegal, l.kind, l.name, op, l.state)
}

// Enter takes a hold for op if the state is from and no force began, else
// it returns the refusal. Unlike Step, calls may overlap: a call made while
// running (a revocation, a supplier's creation) that the physical end must
// wait for. End it with Release.
func (l *Lifecycle) Enter(op string, from State) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != from || l.forced {
		return l.refuseLocked(op)
	}
	l.holds++
	return nil
}

// Step begins op, a step that must not overlap itself (Prepare, Start), if
// the state is from and no force began; otherwise, or while another Step has
// not left, it returns a refusal (Refuse's). It takes a hold: the caller then
// works outside the lock (into foreign code if it must), moves on with
// Advance, and ends with Leave, always.
func (l *Lifecycle) Step(op string, from State) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy {
		return fmt.Errorf("%w: %s %q cannot %s while another step is in progress", l.illegal, l.kind, l.name, op)
	}
	if l.state != from || l.forced {
		return l.refuseLocked(op)
	}
	l.busy = true
	l.holds++
	return nil
}

// Leave ends what Step began: it gives the hold back (the last one after the
// logical end runs the finalizer and closes Done) and lets the next Step go.
func (l *Lifecycle) Leave() {
	l.mu.Lock()
	l.busy = false
	l.holds--
	l.endLocked() // unlocks
}

// Advance moves the state from from to to and reports whether it did: false
// when the state is no longer from or a force began (a stop came first; the
// caller undoes what it made, or leaves it to the finalizer).
func (l *Lifecycle) Advance(from, to State) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != from || l.forced {
		return false
	}
	l.state = to
	return true
}

// Hold takes a hold, for a goroutine about to start or a call Done must
// wait for, unless the physical end was reached; it reports whether it took
// one. A hold taken, Done waits for its Release. Go takes and gives back
// its own.
func (l *Lifecycle) Hold() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.holds++
	return true
}

// Release gives a hold back; the last one after the logical end runs the
// finalizer and closes Done.
func (l *Lifecycle) Release() {
	l.mu.Lock()
	l.holds--
	l.endLocked() // unlocks
}

// Go starts f on a goroutine the component owns, errgroup's Go with a
// panic and Goexit catcher: it takes a hold (Done waits for f), starts f,
// records what f returned, its panic as a *PanicError, or its
// runtime.Goexit as a *PanicError of ErrGoexit (as Record does: the first
// error wins; each wrapped as `<kind> "<name>": <what>: <err>`), and gives
// the hold back when f ended, however it ended. It reports false, and
// starts nothing, once the physical end was reached. Cost: one goroutine,
// the hold's two lock turns.
func (l *Lifecycle) Go(what string, f func() error) bool {
	if !l.Hold() {
		return false
	}
	go func() {
		defer l.Release()
		l.Record(l.wrap(what, Call(f, func(p *PanicError) { l.Record(l.wrap(what, p)) })))
	}()
	return true
}

// Call runs f, user code, inline, under the guard: it returns f's error, or
// f's panic as a *PanicError; a runtime.Goexit of f is recorded (a
// *PanicError of ErrGoexit, wrapped as Go's) before the goroutine goes on
// unwinding, so that the component's Err says why it ended. It takes no
// hold: call it from a goroutine started by Go, or within a Step or Enter.
func (l *Lifecycle) Call(f func() error) error {
	return Call(f, func(p *PanicError) { l.Record(l.wrap("call", p)) })
}

// wrap names the component and what failed; nil stays nil.
func (l *Lifecycle) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %q: %s: %w", l.kind, l.name, what, err)
}

// Quiesce begins a graceful stop: NEW, PREPARED and RUNNING move to
// STOPPING. It returns the state it left and whether this call began the
// stop (false when a stop had begun before), so that the caller closes its
// intake once; from NEW or PREPARED, where nothing runs, the caller ends
// with Stop.
func (l *Lifecycle) Quiesce() (from State, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from = l.state
	if from >= StateStopping {
		return from, false
	}
	l.state = StateStopping
	return from, true
}

// Force begins a force stop: the state moves to STOPPED at once (the
// logical end; Done still waits for the holds), Forced reports true, and
// nothing graceful starts any more (Step, Enter and Advance refuse). It
// returns the state it left and whether this call was the first force, so
// that the caller cancels what runs once. It takes over a graceful stop in
// progress.
func (l *Lifecycle) Force() (from State, first bool) {
	l.mu.Lock()
	from = l.state
	if l.forced {
		l.mu.Unlock()
		return from, false
	}
	l.forced = true
	l.stopLocked()
	return from, true
}

// Stop reaches the logical end, from any state: the state moves to
// STOPPED; once no hold is left, the finalizer runs and Done closes. Call
// it when the last work of a stop ended, or when a stop found nothing
// running.
func (l *Lifecycle) Stop() {
	l.mu.Lock()
	l.stopLocked()
}

// stopLocked is Stop with l.mu held; it unlocks.
func (l *Lifecycle) stopLocked() {
	if l.state != StateStopped {
		l.state = StateStopped
		close(l.stopped)
	}
	l.endLocked()
}

// endLocked closes done if the physical end is reached, running the
// finalizer first, outside the lock. Called with l.mu held; it unlocks.
func (l *Lifecycle) endLocked() {
	if l.state != StateStopped || l.holds > 0 || l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	if l.final != nil {
		l.final()
	}
	close(l.done)
}

// Await waits for the physical end, then returns Err; or for ctx to end
// first, then returns ctx's error, or what onTimeout makes of it when not nil
// (name what is still running, with Unfinished; wrap the error given).
// Termination wins when both happened. It is StopGracefully's wait.
func (l *Lifecycle) Await(ctx context.Context, onTimeout func(error) error) error {
	select {
	case <-l.done:
		return l.Err()
	case <-ctx.Done():
	}
	select {
	case <-l.done:
		return l.Err()
	default:
	}
	if onTimeout != nil {
		return onTimeout(ctx.Err())
	}
	return ctx.Err()
}

// Unfinished says, in the state's terms, which end a component that is not
// done has not reached: "not stopped" before the logical end, "stopped, not
// done" after it (every goroutine has not exited yet), "done" after both.
// It is the wording of a timed-out StopGracefully.
func (l *Lifecycle) Unfinished() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return "done"
	case l.state == StateStopped:
		return "stopped, not done"
	}
	return "not stopped"
}
