// Package lifecycle is the one state machine behind every long-lived handle
// of aggflow (dispatchers, the runtime, the scheduler supplier): the state,
// the forced flag, the first error, and two ends, logical and physical.
//
// The logical end (Stopped) is the state StateStopped: nothing more will be
// admitted or handled. The physical end (Done) comes once the logical end is
// reached and every hold is released: a hold stands for a goroutine or a
// call into foreign code the component must wait for (a source, a Prepare in
// progress). So a caller that stops a component holds no lock across foreign
// code: it takes a hold, leaves the lock, calls, and releases.
//
// A component embeds a Core, as context's timerCtx embeds cancelCtx, and adds
// only what differs. All methods are safe for concurrent use; none calls
// foreign code with the lock held (the finalizer runs outside it).
package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// State is a lifecycle state: NEW -> PREPARED -> RUNNING -> STOPPING ->
// STOPPED, Wow's AggregateDispatcher states. States only move forward.
type State int32

const (
	New State = iota
	Prepared
	Running
	Stopping
	Stopped
)

var names = [...]string{"NEW", "PREPARED", "RUNNING", "STOPPING", "STOPPED"}

// String returns the upper-case Wow name of the state ("RUNNING").
func (s State) String() string {
	if s >= 0 && int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Core holds one component's lifecycle. Its zero value is not usable: call
// Init before sharing it.
type Core struct {
	kind, name string
	illegal    error // wrapped by every refusal, so callers' sentinels apply
	final      func()

	mu      sync.Mutex
	state   State
	forced  bool
	err     error
	holds   int
	busy    bool // an Enter has not left yet
	closed  bool
	stopped chan struct{} // closed at the logical end
	done    chan struct{} // closed at the physical end
}

// Init readies c for a component of kind ("dispatcher") named name, starting
// in state from. illegal is the sentinel that refusals wrap. final, if not
// nil, runs once, outside the lock, when the physical end is reached, just
// before Done closes: the place to release what the component owns.
func (c *Core) Init(kind, name string, from State, illegal error, final func()) {
	c.kind, c.name, c.state, c.illegal, c.final = kind, name, from, illegal, final
	c.stopped, c.done = make(chan struct{}), make(chan struct{})
}

// Name returns the component's name.
func (c *Core) Name() string { return c.name }

// Kind returns the component's kind, as given to Init.
func (c *Core) Kind() string { return c.kind }

// State returns the current state.
func (c *Core) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Forced reports whether a force stop began.
func (c *Core) Forced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forced
}

// Done is closed at the physical end: the component is stopped and every
// goroutine it owns has exited.
func (c *Core) Done() <-chan struct{} { return c.done }

// Stopped is closed at the logical end: the state is StateStopped.
func (c *Core) Stopped() <-chan struct{} { return c.stopped }

// Err returns the first error recorded, nil if none.
func (c *Core) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Record keeps err as Err() unless an error was recorded before; nil is
// ignored.
func (c *Core) Record(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// Refuse returns the error of op refused in the current state: it wraps the
// sentinel given to Init and names the component and the state.
func (c *Core) Refuse(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refuseLocked(op)
}

func (c *Core) refuseLocked(op string) error {
	return fmt.Errorf("%w: %s %q cannot %s from state %v", c.illegal, c.kind, c.name, op, c.state)
}

// Enter takes a hold for op if the state is from and no stop began, else it
// returns the refusal. The caller then works outside the lock and ends with
// Advance (or not) and Release. Calls may overlap (a supplier's creations).
func (c *Core) Enter(op string, from State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != from || c.forced {
		return c.refuseLocked(op)
	}
	c.holds++
	return nil
}

// Step is Enter for a step that must not overlap itself (Prepare, Start):
// while one is in progress, another is refused. End it with Leave.
func (c *Core) Step(op string, from State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy {
		return fmt.Errorf("%w: %s %q cannot %s while another step is in progress", c.illegal, c.kind, c.name, op)
	}
	if c.state != from || c.forced {
		return c.refuseLocked(op)
	}
	c.busy = true
	c.holds++
	return nil
}

// Leave ends what Step began: the next Step may go, and the hold is given
// back.
func (c *Core) Leave() {
	c.mu.Lock()
	c.busy = false
	c.holds--
	c.endLocked() // unlocks
}

// Advance moves from one state to the next one and reports whether it did:
// false when the state is no longer from (a stop came first).
func (c *Core) Advance(from, to State) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != from || c.forced {
		return false
	}
	c.state = to
	return true
}

// Hold takes a hold, for a goroutine about to start, unless the physical end
// was reached; it reports whether it took one.
func (c *Core) Hold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.holds++
	return true
}

// Release gives a hold back; the last one after the logical end finalizes.
func (c *Core) Release() {
	c.mu.Lock()
	c.holds--
	c.endLocked() // unlocks
}

// Quiesce begins a graceful stop: NEW, PREPARED and RUNNING move to
// STOPPING. It returns the state it left and whether this call began the
// stop (false when a stop had begun before).
func (c *Core) Quiesce() (from State, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from = c.state
	if from >= Stopping {
		return from, false
	}
	c.state = Stopping
	return from, true
}

// Force begins a force stop: the state moves to STOPPED at once (the
// logical end) and Forced reports true. It returns the state it left and
// whether this call was the first force.
func (c *Core) Force() (from State, first bool) {
	c.mu.Lock()
	from = c.state
	if c.forced {
		c.mu.Unlock()
		return from, false
	}
	c.forced = true
	c.stopLocked()
	return from, true
}

// Stop reaches the logical end: the state moves to STOPPED (from any state)
// and Stopped closes; once no hold is left, Done closes too.
func (c *Core) Stop() {
	c.mu.Lock()
	c.stopLocked()
}

// stopLocked is Stop with c.mu held; it unlocks.
func (c *Core) stopLocked() {
	if c.state != Stopped {
		c.state = Stopped
		close(c.stopped)
	}
	c.endLocked()
}

// endLocked closes done if the physical end is reached, running the
// finalizer first, outside the lock. Called with c.mu held; it unlocks.
func (c *Core) endLocked() {
	if c.state != Stopped || c.holds > 0 || c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	if c.final != nil {
		c.final()
	}
	close(c.done)
}

// Await waits for the physical end (then returns Err()) or for ctx to end
// (then returns ctx's error, or what onTimeout makes of it when not nil).
// Termination wins when both happened.
func (c *Core) Await(ctx context.Context, onTimeout func(error) error) error {
	select {
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
	}
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	if onTimeout != nil {
		return onTimeout(ctx.Err())
	}
	return ctx.Err()
}
