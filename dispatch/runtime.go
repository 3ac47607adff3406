package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultShutdownTimeout is the Runtime's default shutdown deadline: Wow's
// wow.shutdown-timeout default (WowProperties.kt).
const DefaultShutdownTimeout = 60 * time.Second

// RuntimeOption configures NewRuntime. A nil RuntimeOption is ignored.
type RuntimeOption func(*runtimeOptions)

type runtimeOptions struct {
	timeout time.Duration
}

// WithShutdownTimeout sets the one deadline that bounds a whole graceful
// shutdown (default DefaultShutdownTimeout); it must be positive, else
// NewRuntime returns ErrInvalidOption. Wow: WowRuntime's shutdownTimeout.
func WithShutdownTimeout(d time.Duration) RuntimeOption {
	return func(o *runtimeOptions) { o.timeout = d }
}

// Runtime runs an ordered list of components as one unit: Wow's WowRuntime
// (WowRuntime.kt), reduced to the lifecycle, with RuntimeComponentGroup's
// ordering (RuntimeComponentGroup.kt). It is one-shot: once stopped, it cannot
// be started again; build a new one.
//
// All methods are safe for concurrent use. The Runtime starts one goroutine,
// when its stop sequence ends, that waits for the components' Done (see
// Done).
type Runtime struct {
	components []Component
	timeout    time.Duration

	mu        sync.Mutex
	state     runtimeState
	started   chan struct{}           // closed when Start has returned
	stopped   chan struct{}           // closed when the stop sequence ended
	done      chan struct{}           // closed when, after that, every component's Done closed
	stopErr   error                   // the result of the stop sequence
	interrupt context.CancelCauseFunc // cuts a graceful stop short (ForceStop)
	forced    bool
}

type runtimeState int

const (
	runtimeNew runtimeState = iota
	runtimeStarting
	runtimeRunning
	runtimeStopping
	runtimeStopped
)

// NewRuntime returns a Runtime over components, in the order that Start
// prepares and starts them; stops visit them in reverse. A nil component or
// one listed twice returns ErrInvalidArgument (Wow S-1.14.1).
func NewRuntime(components []Component, opts ...RuntimeOption) (*Runtime, error) {
	o := runtimeOptions{timeout: DefaultShutdownTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%w: shutdown timeout %v is not positive", ErrInvalidOption, o.timeout)
	}
	for i, c := range components {
		if c == nil {
			return nil, fmt.Errorf("%w: component %d is nil", ErrInvalidArgument, i)
		}
		for _, prev := range components[:i] {
			if prev == c {
				return nil, fmt.Errorf("%w: component %d (%T) is registered more than once", ErrInvalidArgument, i, c)
			}
		}
	}
	return &Runtime{
		components: slices.Clone(components),
		timeout:    o.timeout,
		started:    make(chan struct{}),
		stopped:    make(chan struct{}),
		done:       make(chan struct{}),
	}, nil
}

// Start prepares every component in order (a readiness barrier: no component
// starts before all are prepared), then starts them in order. ctx is passed to
// each Prepare. If a step fails, every component (prepared or not) is
// force-stopped in reverse order and the error is returned; the Runtime is then
// stopped. Start may be called once: after a stop began it returns ErrStopped,
// a second call returns ErrIllegalState. Wow: WowRuntime.start().
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	switch r.state {
	case runtimeNew:
		r.state = runtimeStarting
	case runtimeStopping, runtimeStopped:
		r.mu.Unlock()
		return fmt.Errorf("%w: runtime cannot start after a stop", ErrStopped)
	default:
		r.mu.Unlock()
		return fmt.Errorf("%w: runtime already started", ErrIllegalState)
	}
	r.mu.Unlock()
	defer close(r.started)

	err := r.startAll(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.state == runtimeStarting && err == nil:
		r.state = runtimeRunning
		return nil
	case r.state == runtimeStarting:
		r.state = runtimeStopped
		forceAll(r.components) // the ones never prepared too: they end stopped
		r.closeStopped()
		return err
	case r.forced:
		// ForceStop raced a Prepare or Start: force once more, so that a
		// component that became ready after the first pass is stopped too
		// (Wow's compensating force, S-1.14.3).
		forceAll(r.components)
	}
	if err == nil {
		err = fmt.Errorf("%w: runtime stopped while starting", ErrStopped)
	}
	return err
}

// startAll prepares then starts the components, stopping early when a stop
// takes over.
func (r *Runtime) startAll(ctx context.Context) error {
	for i, c := range r.components {
		if !r.enter() {
			return nil
		}
		if err := c.Prepare(ctx); err != nil {
			return fmt.Errorf("dispatch: runtime component %d (%T) failed to prepare: %w", i, c, err)
		}
	}
	for i, c := range r.components {
		if !r.enter() {
			return nil
		}
		if err := c.Start(); err != nil {
			return fmt.Errorf("dispatch: runtime component %d (%T) failed to start: %w", i, c, err)
		}
	}
	return nil
}

// enter reports whether Start may go on to prepare (or start) the next
// component: false once a stop took over.
func (r *Runtime) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runtimeStarting {
		return false
	}
	return true
}

// forceAll force-stops cs in reverse order. ForceStop of a component is prompt
// and non-blocking by contract, so callers may hold their lock.
func forceAll(cs []Component) {
	for _, c := range slices.Backward(cs) {
		c.ForceStop()
	}
}

// StopGracefully quiesces every component in order (one that Start never
// prepared goes straight to stopped), then stops each gracefully in reverse
// order, all under one deadline: the shutdown timeout
// (WithShutdownTimeout) or ctx, whichever ends first. When the deadline
// expires, every component is force-stopped in reverse order and the result
// wraps ErrShutdownTimeout (and ctx's error when ctx ended first). Errors of
// components are joined. Before Start it quiesces the components, which
// stops them at once, and returns nil. A
// concurrent or later call waits for the same result (or its own ctx); a
// ForceStop during the stop makes it return nil unless a component failed.
// Called during Start, it waits until Start returns. It does not wait for
// the goroutines of components force-stopped at the deadline: Done does. Wow:
// WowRuntime.stopGracefully() with its global deadline (S-1.14.5).
func (r *Runtime) StopGracefully(ctx context.Context) error {
	r.mu.Lock()
	switch r.state {
	case runtimeNew:
		r.state = runtimeStopped
		close(r.started)
		// Nothing was prepared: quiescing stops each component at once.
		for _, c := range r.components {
			c.Quiesce()
		}
		r.closeStopped()
		r.mu.Unlock()
		return nil
	case runtimeStarting, runtimeRunning:
		r.state = runtimeStopping
	default:
		r.mu.Unlock()
		select {
		case <-r.stopped:
			return r.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	deadline, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	graceful, interrupt := context.WithCancelCause(deadline)
	defer interrupt(nil)
	r.interrupt = interrupt
	r.mu.Unlock()

	complete, err := r.stopAll(graceful)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !complete && !r.forced {
		forceAll(r.components)
		timeout := fmt.Errorf("%w after %v", ErrShutdownTimeout, r.timeout)
		if ctx.Err() != nil {
			timeout = fmt.Errorf("%w: %w", ErrShutdownTimeout, ctx.Err())
		}
		err = errors.Join(timeout, err)
	}
	r.state = runtimeStopped
	r.stopErr = err
	r.closeStopped()
	return err
}

// stopAll is the graceful sequence, bounded by ctx. complete is false when ctx
// ended before every component stopped.
func (r *Runtime) stopAll(ctx context.Context) (complete bool, err error) {
	select {
	case <-r.started:
	case <-ctx.Done():
		return false, nil
	}
	// Start has returned: the components it did not reach were never
	// prepared; their Quiesce stops them at once, so that every component
	// ends stopped.
	for _, c := range r.components {
		c.Quiesce()
	}
	var errs []error
	for i, c := range slices.Backward(r.components) {
		err := c.StopGracefully(ctx)
		if ctx.Err() != nil {
			return false, errors.Join(errs...)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("dispatch: runtime component %d (%T) failed to stop: %w", i, c, err))
		}
	}
	return true, errors.Join(errs...)
}

// ForceStop force-stops every component in reverse order, prepared or not, and
// returns without waiting. A graceful stop in progress is cut short and
// returns. Idempotent; safe before Start and concurrently with any method.
// Wow: WowRuntime.forceStop() (S-1.14.8; like Wow it does not quiesce).
func (r *Runtime) ForceStop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forced {
		return
	}
	r.forced = true
	switch r.state {
	case runtimeNew:
		close(r.started)
		fallthrough
	case runtimeStarting, runtimeRunning:
		// A Start in progress notices at its next step.
		r.state = runtimeStopped
		r.closeStopped()
	case runtimeStopping:
		// Cut the graceful sequence short before its components return, so
		// that it does not go on to the next one; it closes stopped.
		r.interrupt(ErrForceStopped)
	}
	forceAll(r.components)
}

// Done is closed once the Runtime is stopped (the stop sequence, graceful or
// forced, has ended) and then every component that has a Done method
// (Dispatcher, MainDispatcher, Composite) has closed it: the goroutines of
// the components have exited, handlers that ignore their context included.
// It is what to wait on after ForceStop or a timed-out StopGracefully, which
// both return without waiting for those goroutines. A component without Done
// is not waited for.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// closeStopped ends the stop sequence and starts the goroutine that closes
// done once the components are done. r.mu is held.
func (r *Runtime) closeStopped() {
	close(r.stopped)
	go func() {
		awaitDone(r.components)
		close(r.done)
	}()
}
