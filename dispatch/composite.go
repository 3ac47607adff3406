package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/aggregate"
)

// ChildFactory builds one child of a Composite, given the supplier the child
// must take its schedulers from (a borrowed view: stopping it does nothing).
type ChildFactory func(supplier aggregate.SchedulerSupplier) (Component, error)

// Composite runs several child components that share one scheduler supplier,
// which the Composite owns: Wow's CompositeEventDispatcher
// (CompositeEventDispatcher.kt). Each child gets the supplier as an
// aggregate.SchedulerSupplier, which cannot stop it; the Composite stops
// it once, after every child. Prepare, Start and Quiesce visit the children
// in the given order; StopGracefully and ForceStop visit them in reverse.
//
// All methods are safe for concurrent use. NewComposite starts nothing and
// builds no child: the children are built at Prepare, all of them before any
// is prepared (Wow S-1.13.4).
type Composite struct {
	name      string
	supplier  ownedSupplier
	factories []ChildFactory

	mu       sync.Mutex
	state    State
	children []Component
	entered  int // children whose Prepare was called
	forced   bool

	doneOnce sync.Once
	// supplierStopped: a graceful stop of the supplier returned, so Done
	// need not wait for it again.
	supplierStopped atomic.Bool
	done            chan struct{} // closed by the goroutine closeDone starts
}

// NewComposite returns a Composite named name that owns supplier and builds
// one child per factory. An empty name, a nil supplier or a nil factory
// returns ErrInvalidArgument. On success the Composite owns supplier: its
// stops stop the supplier.
func NewComposite(name string, supplier ownedSupplier, children ...ChildFactory) (*Composite, error) {
	if name == "" || supplier == nil {
		return nil, fmt.Errorf("%w: composite needs a name and a supplier", ErrInvalidArgument)
	}
	if slices.ContainsFunc(children, func(f ChildFactory) bool { return f == nil }) {
		return nil, fmt.Errorf("%w: composite %q has a nil child factory", ErrInvalidArgument, name)
	}
	return &Composite{name: name, supplier: supplier, factories: slices.Clone(children), done: make(chan struct{})}, nil
}

// Done is closed once the Composite is stopped and every goroutine it owns
// has exited: every child that has a Done method has closed it, and the
// supplier's schedulers have exited. It is the thing to wait on after a
// ForceStop or a StopGracefully cut short by its ctx (which closes it only
// once a later stop reaches the supplier, or a ForceStop). A Composite
// stopped before Prepare closes it at once.
func (c *Composite) Done() <-chan struct{} { return c.done }

// closeDone starts, once, the goroutine that closes done when the children
// and the supplier are done. Call it once the supplier's stop has begun, so
// that waiting for the supplier does not begin it before the children
// drained.
func (c *Composite) closeDone() {
	c.doneOnce.Do(func() {
		c.mu.Lock()
		children := c.children
		c.mu.Unlock()
		go func() {
			awaitDone(children)
			if !c.supplierStopped.Load() {
				// After ForceStop, or a graceful stop cut short: returns
				// once the schedulers' goroutines exited.
				_ = c.supplier.StopGracefully(context.Background())
			}
			close(c.done)
		}()
	})
}

// Name returns the name given to NewComposite.
func (c *Composite) Name() string { return c.name }

// State returns the current lifecycle state.
func (c *Composite) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Prepare builds every child, then prepares them in order. It may be called
// once, from StateNew (else ErrIllegalState); after ForceStop it returns
// ErrStopped. A factory's failure returns before any child is prepared; a
// child's Prepare failure returns before the next child is prepared. The
// caller then force-stops the Composite (as Runtime does), which force-stops
// the children built and the supplier.
func (c *Composite) Prepare(ctx context.Context) error {
	c.mu.Lock()
	if err := c.refuse("prepare", StateNew); err != nil {
		c.mu.Unlock()
		return err
	}
	c.state = StatePrepared
	c.mu.Unlock()

	var borrowed aggregate.SchedulerSupplier = c.supplier
	children := make([]Component, len(c.factories))
	for i, f := range c.factories {
		child, err := f(borrowed)
		if err == nil && child == nil {
			err = fmt.Errorf("%w: nil component", ErrInvalidArgument)
		}
		if err != nil {
			return fmt.Errorf("dispatch: composite %q failed to build child %d: %w", c.name, i, err)
		}
		children[i] = child
	}
	c.mu.Lock()
	c.children = children
	forced := c.forced
	c.mu.Unlock()
	if forced {
		// ForceStop ran while the children were being built.
		forceAll(children)
		return fmt.Errorf("%w: composite %q was force-stopped while preparing", ErrStopped, c.name)
	}
	for i, child := range children {
		if err := c.enter(i); err != nil {
			return err
		}
		if err := child.Prepare(ctx); err != nil {
			return fmt.Errorf("dispatch: composite %q child %d failed to prepare: %w", c.name, i, err)
		}
	}
	return c.enter(len(children))
}

// refuse returns nil when the Composite may leave state from, else the error
// naming why not. Called with c.mu held.
func (c *Composite) refuse(op string, from State) error {
	if c.forced {
		return fmt.Errorf("%w: composite %q cannot %s after a force stop", ErrStopped, c.name, op)
	}
	if c.state != from {
		return fmt.Errorf("%w: composite %q cannot %s from state %v", ErrIllegalState, c.name, op, c.state)
	}
	return nil
}

// enter records that child i is about to be prepared; it refuses once a stop
// began, and after ForceStop it force-stops the children again so that one prepared while
// the first pass ran is stopped too (Wow S-1.14.3).
func (c *Composite) enter(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forced {
		forceAll(c.children)
		return fmt.Errorf("%w: composite %q was force-stopped while preparing", ErrStopped, c.name)
	}
	if c.state != StatePrepared {
		return fmt.Errorf("%w: composite %q was quiesced while preparing", ErrStopped, c.name)
	}
	c.entered = max(c.entered, min(i+1, len(c.children)))
	return nil
}

// prepared returns the children whose Prepare was called.
func (c *Composite) prepared() []Component {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.children[:c.entered]
}

// Start starts the prepared children in order and stops at the first
// failure, which it returns: later children are not started (Wow CED-02). It
// is a no-op when running, stopped or force-stopped, and returns
// ErrIllegalState from StateNew and StateStopping.
func (c *Composite) Start() error {
	c.mu.Lock()
	switch {
	case c.forced || c.state == StateRunning || c.state == StateStopped:
		c.mu.Unlock()
		return nil
	case c.state != StatePrepared:
		err := fmt.Errorf("%w: composite %q cannot start from state %v", ErrIllegalState, c.name, c.state)
		c.mu.Unlock()
		return err
	}
	c.state = StateRunning
	c.mu.Unlock()
	for i, child := range c.prepared() {
		if err := child.Start(); err != nil {
			return fmt.Errorf("dispatch: composite %q child %d failed to start: %w", c.name, i, err)
		}
	}
	return nil
}

// Quiesce closes the intake of every prepared child, in order. From
// StateNew it stops the Composite at once, and its supplier, which lent
// nothing, in the background (Done says when). Prompt and idempotent; a no-op after ForceStop.
func (c *Composite) Quiesce() {
	c.mu.Lock()
	if c.forced {
		c.mu.Unlock()
		return
	}
	unprepared := c.state == StateNew
	switch c.state {
	case StateNew:
		c.state = StateStopped
	case StatePrepared, StateRunning:
		c.state = StateStopping
	}
	c.mu.Unlock()
	if unprepared {
		c.closeDone() // it lent nothing: the supplier's stop ends at once
		return
	}
	for _, child := range c.prepared() {
		child.Quiesce()
	}
}

// StopGracefully quiesces, stops the prepared children gracefully in reverse
// order, then, unless ForceStop ran, stops the supplier gracefully: the
// supplier's schedulers are disposed only after every child drained (Wow
// CED-07). Failures are joined and the sequence goes on. If ctx ends first it
// returns ctx.Err() and the children go on draining; a later call resumes
// (children already stopped return at once; the supplier's graceful stop is
// shared, so a second call only waits for it). Unlike Wow's, it quiesces
// first, as Dispatcher.StopGracefully does.
func (c *Composite) StopGracefully(ctx context.Context) error {
	c.Quiesce()
	var errs []error
	for i, child := range slices.Backward(c.prepared()) {
		if err := child.StopGracefully(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("dispatch: composite %q child %d failed to stop: %w", c.name, i, err))
		}
	}
	c.mu.Lock()
	forced := c.forced
	c.state = StateStopped
	c.mu.Unlock()
	if !forced {
		err := c.supplier.StopGracefully(ctx)
		if err != nil && ctx.Err() != nil {
			c.closeDone() // Done waits for the rest of the supplier's stop
			return ctx.Err()
		}
		c.supplierStopped.Store(true) // its schedulers have exited
		c.closeDone()
		if err != nil {
			errs = append(errs, fmt.Errorf("dispatch: composite %q failed to stop its supplier: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// ForceStop force-stops every child built, in reverse order, then the
// supplier. Prompt, does not wait, idempotent, safe before Prepare (then only
// the supplier is stopped) and concurrently with any method; a Prepare in
// progress force-stops its children again when it notices.
func (c *Composite) ForceStop() {
	c.mu.Lock()
	if c.forced {
		c.mu.Unlock()
		return
	}
	c.forced = true
	c.state = StateStopped
	children := c.children
	c.mu.Unlock()
	forceAll(children)
	c.supplier.ForceStop()
	c.closeDone()
}

// Err returns nil: a Composite's failures are returned by its methods.
func (c *Composite) Err() error { return nil }
