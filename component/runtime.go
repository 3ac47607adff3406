package component

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultShutdownTimeout is the Runtime's default shutdown deadline.
const DefaultShutdownTimeout = 60 * time.Second

// Resource is what a Runtime can own besides its components: something it
// stops after every component, gracefully after a graceful stop and at once
// after a force, and whose Done it waits for. *aggregate.Supplier is one.
// StopGracefully and ForceStop follow Component's contract.
type Resource interface {
	StopGracefully(ctx context.Context) error
	ForceStop()
	Done() <-chan struct{}
}

// RuntimeOption configures NewRuntime. A nil RuntimeOption is ignored.
type RuntimeOption func(*runtimeOptions)

type runtimeOptions struct {
	timeout time.Duration
	owned   []Resource
}

// WithShutdownTimeout sets the one deadline that bounds a whole graceful
// shutdown (default DefaultShutdownTimeout); it must be positive, else
// NewRuntime returns ErrInvalidOption.
func WithShutdownTimeout(d time.Duration) RuntimeOption {
	return func(o *runtimeOptions) { o.timeout = d }
}

// WithOwned makes the Runtime own rs: it stops them after every component,
// in reverse order (gracefully after a graceful stop, at once after a force
// or a failed or timed-out graceful stop), and its Done waits for theirs.
// The Runtime owns nothing else: components borrow what they were given. A
// Runtime may own an *aggregate.Supplier its components borrow: the
// children borrow the supplier, which is stopped once, after every child. A nil or
// repeated resource makes NewRuntime return ErrInvalidOption. Options
// accumulate.
func WithOwned(rs ...Resource) RuntimeOption {
	return func(o *runtimeOptions) { o.owned = append(o.owned, rs...) }
}

// Runtime runs an ordered list of components as one unit. It is itself a Component, so runtimes
// nest. It is one-shot: once stopped, it cannot be started again; build a new
// one.
//
// Lifecycle: Prepare prepares every component in order, Start starts every
// one in order; a stop quiesces every component in order, stops them
// gracefully in reverse order, then stops what the Runtime owns
// (WithOwned), all under one deadline. Finite work ends by itself: once every
// component's Done closed on its own (their sources completed), the Runtime
// stops as after StopGracefully. Done closes once the Runtime is stopped and
// every component's and owned resource's Done closed, and every goroutine of
// the Runtime exited.
//
// Concurrency: all methods are safe for concurrent use, and no lock is held
// while a component's or resource's method runs. Graceful stops run on
// goroutines of the Runtime, so that one ignoring its ctx does not hold the
// Runtime past the deadline; Done waits for them. A panic in a component's
// or resource's method is recovered into a *PanicError, joined into the
// errors, and the sequence goes on with the others.
type Runtime struct {
	life       Lifecycle
	components []Component
	names      []string // the components' names, for errors
	owned      []Resource
	ownedNames []string
	timeout    time.Duration

	// stopCtx bounds the graceful stop sequence: it is cancelled by a force
	// (cause ErrForceStopped) or when the deadline passes (cause wrapping
	// ErrShutdownTimeout).
	stopCtx    context.Context
	cancelStop context.CancelCauseFunc

	mu        sync.Mutex
	busy      chan struct{}   // closed when the Prepare or Start in progress returns
	stopping  bool            // the stop sequence has begun
	watching  bool            // the goroutine that waits for the components is started
	armed     chan struct{}   // closed once the deadline is set
	armCtx    context.Context // the ctx of the StopGracefully that set it
	disarm    func()          // releases the deadline's timer and watch
	ended     chan struct{}   // closed once result is set
	published bool
	result    error   // what StopGracefully returns
	errs      []error // every failure seen, joined into Err
}

// NewRuntime returns a Runtime named name over components, in the order in
// which Prepare and Start visit them; stops visit them in reverse. It starts
// nothing. An empty name, a nil component or one listed twice returns
// ErrInvalidArgument; an invalid option ErrInvalidOption.
func NewRuntime(name string, components []Component, opts ...RuntimeOption) (*Runtime, error) {
	o := runtimeOptions{timeout: DefaultShutdownTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: a runtime needs a name", ErrInvalidArgument)
	case o.timeout <= 0:
		return nil, fmt.Errorf("%w: runtime %q: shutdown timeout %v is not positive", ErrInvalidOption, name, o.timeout)
	}
	if i := invalidAt(components); i >= 0 {
		return nil, fmt.Errorf("%w: runtime %q: component %d is nil or registered more than once", ErrInvalidArgument, name, i)
	}
	if i := invalidAt(o.owned); i >= 0 {
		return nil, fmt.Errorf("%w: runtime %q: owned resource %d is nil or given more than once", ErrInvalidOption, name, i)
	}
	r := &Runtime{
		components: slices.Clone(components),
		owned:      slices.Clone(o.owned),
		timeout:    o.timeout,
		armed:      make(chan struct{}),
		ended:      make(chan struct{}),
	}
	for _, c := range r.components {
		r.names = append(r.names, c.Name())
	}
	for i, res := range r.owned {
		r.ownedNames = append(r.ownedNames, resourceName(i, res))
	}
	r.stopCtx, r.cancelStop = context.WithCancelCause(context.Background())
	r.life.Init("runtime", name, nil, r.finish)
	return r, nil
}

// invalidAt returns the index of the first element of xs that is nil or
// equal to an earlier one, or -1.
func invalidAt[T comparable](xs []T) int {
	for i, x := range xs {
		if any(x) == nil || slices.Contains(xs[:i], x) {
			return i
		}
	}
	return -1
}

// resourceName names the owned resource i in errors: its Name, if it has one.
func resourceName(i int, res Resource) string {
	if n, ok := res.(interface{ Name() string }); ok {
		return n.Name()
	}
	return "owned resource " + strconv.Itoa(i)
}

// Name returns the name given to NewRuntime.
func (r *Runtime) Name() string { return r.life.Name() }

// State returns the current lifecycle state.
func (r *Runtime) State() State { return r.life.State() }

// Done is closed once the Runtime is stopped, every component's and every
// owned resource's Done closed, and every goroutine of the Runtime exited
// (those running a graceful stop that ignores its ctx included). It is what
// to wait on after ForceStop or a timed-out StopGracefully, which both return
// without waiting for the components' goroutines.
func (r *Runtime) Done() <-chan struct{} { return r.life.Done() }

// Err returns, once Done is closed, every failure joined: a Prepare or Start
// failure, a stop's failures and timeout, panics recovered from components
// and resources, and each component's Err (once). Before, nil.
func (r *Runtime) Err() error { return r.life.Err() }

// Prepare prepares every component in order: a readiness barrier, since no
// component starts before all are prepared. Each Prepare gets a ctx derived
// from ctx that identifies the Runtime (see StopGracefully); a component may
// keep it, or its values, for its work. It is cancelled when a force begins
// (cause ErrForceStopped), when the stop's deadline passes, or once the
// Runtime's stop sequence ended. It may be called once, from StateNew, else
// ErrIllegalState (also while another Prepare runs); after a stop began,
// ErrStopped.
//
// A component's failure or panic force-stops every component, prepared or
// not, in reverse order, then the owned resources, and is returned; the
// Runtime is then stopped. A stop that begins meanwhile ends Prepare with
// ErrStopped once the component being prepared returns: a graceful stop
// waits for that, a force does not, and forces the components again then.
func (r *Runtime) Prepare(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(Mark(ctx, r))
	context.AfterFunc(r.stopCtx, func() { cancel(context.Cause(r.stopCtx)) })
	return r.step("prepare", StateNew, StatePrepared, func(c Component) error { return c.Prepare(ctx) })
}

// Start starts every component in order and stops at the first failure,
// which it handles as Prepare does. It may be called once, from
// StatePrepared, else ErrIllegalState; after a stop began, ErrStopped.
func (r *Runtime) Start() error {
	return r.step("start", StatePrepared, StateRunning, Component.Start)
}

// step applies f to every component in order, from state from, and moves to
// state to when every call succeeded and no stop began.
func (r *Runtime) step(op string, from, to State, f func(Component) error) error {
	r.mu.Lock()
	if r.busy != nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: runtime %q cannot %s while a Prepare or Start is in progress", ErrIllegalState, r.Name(), op)
	}
	if err := r.life.Step(op, from); err != nil {
		r.mu.Unlock()
		if r.life.State() >= StateStopping {
			return fmt.Errorf("%w: runtime %q cannot %s after a stop", ErrStopped, r.Name(), op)
		}
		return err
	}
	busy := make(chan struct{})
	r.busy = busy
	r.mu.Unlock()
	defer r.life.Leave()

	err, failed := r.each(op, from, f)
	if failed {
		r.fail(err)
		r.force(ErrForceStopped)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	close(busy)
	r.busy = nil
	if err == nil && !r.life.Advance(from, to) {
		err = r.stoppedWhile(op)
	}
	if err == nil && to == StateRunning {
		r.watchLocked()
	}
	return err
}

// each applies f to the components in order. failed reports a component's
// failure; err without failed, a stop that began meanwhile.
func (r *Runtime) each(op string, from State, f func(Component) error) (err error, failed bool) {
	for i, c := range r.components {
		if r.life.State() != from || r.life.Forced() {
			return r.stoppedWhile(op), false
		}
		if err := protect(func() error { return f(c) }); err != nil {
			return r.wrap("component", r.names[i], op, err), true
		}
		if r.life.Forced() {
			// The force raced this call: force once more, so that a
			// component that became ready after the first pass is stopped.
			r.forceComponents()
			return r.stoppedWhile(op), false
		}
	}
	return nil, false
}

func (r *Runtime) stoppedWhile(op string) error {
	return fmt.Errorf("%w: runtime %q was stopped during %s", ErrStopped, r.Name(), op)
}

// Quiesce begins a graceful stop without waiting for it and without setting
// its deadline: the Runtime moves to StateStopping and, on its own goroutine
// (once a Prepare or Start in progress returned), quiesces every component
// in order. A later StopGracefully sets the deadline and waits; once every
// component is done, the Runtime stops by itself. Prompt and idempotent.
func (r *Runtime) Quiesce() { r.begin(context.Background(), false) }

// StopGracefully stops the Runtime: on its own goroutine, it waits for a
// Prepare or Start in progress to return, quiesces every component in order
// (one never prepared ends stopped at once), stops each gracefully in
// reverse order, then stops the owned resources gracefully, in reverse
// order. One deadline bounds it all: the shutdown timeout
// (WithShutdownTimeout) or ctx, whichever ends first, counted from the first
// StopGracefully (or from the moment every component was done, when the
// Runtime stops by itself). No graceful stop begins after the deadline or a
// ForceStop.
//
// When the deadline passes, or a graceful stop failed, every component is
// force-stopped in reverse order, then every owned resource. The result joins the components' and resources' failures and, if
// the deadline passed, an error wrapping ErrShutdownTimeout (and ctx's error
// when ctx ended first) that names the components and resources still
// running. A component that ignores its ctx does not hold StopGracefully
// past the deadline; Done waits for it.
//
// The first call returns that result once the sequence ended; a concurrent
// or later call returns it too, or ctx.Err() if its own ctx ends first (the
// stop goes on). A ForceStop during the sequence makes it end at once, with
// the failures seen until then. It does not wait for goroutines that a force
// left running: Done does.
//
// A call from inside the Runtime's own work cannot wait for that work to
// end: when ctx carries the Runtime, as the ctx given to a component's
// Prepare does (and, through it, a Dispatcher's handler context), the call
// begins the stop, with the shutdown timeout as deadline, and returns at
// once an error wrapping ErrIllegalState.
func (r *Runtime) StopGracefully(ctx context.Context) error {
	if Marked(ctx, r) {
		r.begin(context.Background(), true)
		return fmt.Errorf("%w: called from inside runtime %q: it cannot wait for itself", ErrIllegalState, r.Name())
	}
	if r.begin(ctx, true) {
		<-r.ended // the deadline is this ctx's: the sequence ends by then
		return r.result
	}
	select {
	case <-r.ended:
		return r.result
	case <-ctx.Done():
	}
	select {
	case <-r.ended:
		return r.result
	default:
		return fmt.Errorf("component: runtime %q: waiting for the stop: %w", r.Name(), ctx.Err())
	}
}

// begin begins the stop, once: the Runtime moves to StateStopping and its
// goroutine starts the sequence. With deadline, it also sets the
// sequence's deadline, once, from ctx and the shutdown timeout, and reports
// whether this call set it.
func (r *Runtime) begin(ctx context.Context, deadline bool) (set bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.life.Quiesce()
	if !r.stopping {
		busy := r.busy
		if !r.life.Go("stop", func() error { r.stop(busy); return nil }) {
			return false // Done is closed: finish published the result
		}
		r.stopping = true
		r.watchLocked()
	}
	if !deadline || r.armCtx != nil {
		return false
	}
	r.armCtx = ctx
	timer := time.AfterFunc(r.timeout, func() { r.cancelStop(ErrShutdownTimeout) })
	unwatch := context.AfterFunc(ctx, func() {
		r.cancelStop(fmt.Errorf("%w: %w", ErrShutdownTimeout, context.Cause(ctx)))
	})
	r.disarm = func() {
		timer.Stop()
		unwatch()
	}
	close(r.armed)
	return true
}

// stop is the graceful sequence, on a goroutine of the Runtime (Go), bounded
// by r.stopCtx. busy is the Prepare or Start in progress when it began.
func (r *Runtime) stop(busy <-chan struct{}) {
	ctx := r.stopCtx
	if busy != nil {
		select {
		case <-busy:
		case <-ctx.Done():
		}
	}
	var errs []error
	for i, c := range r.components {
		errs = r.call(ctx, errs, "component", r.names[i], "quiesce", func() error { c.Quiesce(); return nil })
	}
	select {
	case <-r.armed:
	case <-ctx.Done():
	}
	for i, c := range slices.Backward(r.components) {
		errs = r.call(ctx, errs, "component", r.names[i], "stop", func() error { return c.StopGracefully(ctx) })
	}
	if len(errs) == 0 {
		for i, res := range slices.Backward(r.owned) {
			errs = r.call(ctx, errs, "resource", r.ownedNames[i], "stop", func() error { return res.StopGracefully(ctx) })
		}
	}
	if errors.Is(context.Cause(ctx), ErrShutdownTimeout) {
		errs = append([]error{r.timedOut()}, errs...)
	}
	if len(errs) > 0 {
		r.force(ErrForceStopped) // the force pass after a failed or timed-out graceful pass
	}
	r.life.Stop() // before the result, so that a caller it releases sees StateStopped; this goroutine's hold keeps finish for later
	r.mu.Lock()
	r.publishLocked(errors.Join(errs...))
	if r.disarm != nil {
		r.disarm()
	}
	r.mu.Unlock()
	r.cancelStop(nil) // the sequence ended: release what waits on its ctx
}

// call runs f, the op of the component or resource (kind) name, on a
// goroutine of the Runtime (Go), and waits for it until ctx ends; it does
// nothing once ctx ended. A failure is appended to errs; after ctx ended,
// only a panic is kept (appended to errs, or recorded if nobody waits any
// more): the deadline's error or the force covers the rest.
func (r *Runtime) call(ctx context.Context, errs []error, kind, name, op string, f func() error) []error {
	if ctx.Err() != nil {
		return errs
	}
	res := make(chan error)
	r.life.Go(op, func() error { // cannot fail: the caller holds
		err := r.wrap(kind, name, op, protect(f))
		select {
		case res <- err:
		case <-ctx.Done():
			if isPanic(err) {
				r.fail(err)
			}
		}
		return nil
	})
	select {
	case err := <-res:
		if err != nil && (ctx.Err() == nil || isPanic(err)) {
			errs = append(errs, err)
		}
	case <-ctx.Done():
	}
	return errs
}

// timedOut is the error of a deadline passed: it names what still runs.
func (r *Runtime) timedOut() error {
	var running []string
	for i, c := range r.components {
		if !isClosed(c.Done()) {
			running = append(running, strconv.Quote(r.names[i]))
		}
	}
	for i, res := range r.owned {
		if !isClosed(res.Done()) {
			running = append(running, strconv.Quote(r.ownedNames[i]))
		}
	}
	r.mu.Lock()
	ctx := r.armCtx
	r.mu.Unlock()
	err := fmt.Errorf("%w: runtime %q after %v", ErrShutdownTimeout, r.Name(), r.timeout)
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: runtime %q: %w", ErrShutdownTimeout, r.Name(), ctx.Err())
	}
	if len(running) > 0 {
		err = fmt.Errorf("%w; still running: %s", err, strings.Join(running, ", "))
	}
	return err
}

// ForceStop force-stops every component in reverse order, prepared or not,
// then every owned resource in reverse order, and returns once each of their
// ForceStop returned (prompt, by their contract), without waiting for their
// goroutines: Done does. A graceful stop in progress ends at once, and none
// begins after it; a Prepare or Start in progress returns ErrStopped. A
// panicking ForceStop is recovered and joined into Err; the others are
// called all the same. Idempotent; safe before Prepare and concurrently with
// any method. It does not quiesce first.
func (r *Runtime) ForceStop() {
	if !r.life.Hold() {
		return // Done is closed: everything is stopped
	}
	defer r.life.Release()
	r.force(ErrForceStopped)
}

// force is ForceStop's work, done once, by a caller that holds the Runtime.
func (r *Runtime) force(cause error) {
	r.mu.Lock()
	r.watchLocked()
	r.mu.Unlock()
	if _, first := r.life.Force(); !first {
		return
	}
	r.cancelStop(cause)
	r.forceComponents()
	for i, res := range slices.Backward(r.owned) {
		r.fail(r.wrap("resource", r.ownedNames[i], "force-stop", protect(func() error { res.ForceStop(); return nil })))
	}
}

// forceComponents force-stops every component in reverse order.
func (r *Runtime) forceComponents() {
	for i, c := range slices.Backward(r.components) {
		r.fail(r.wrap("component", r.names[i], "force-stop", protect(func() error { c.ForceStop(); return nil })))
	}
}

// watchLocked starts, once, the goroutine that waits for every component's
// Done in turn, then stops the Runtime if no stop began (finite work ends by
// itself), then waits for every owned resource's Done; Done waits for it.
// r.mu is held, and so is the Runtime.
func (r *Runtime) watchLocked() {
	if r.watching {
		return
	}
	r.watching = r.life.Go("watch", func() error {
		for _, c := range r.components {
			<-c.Done()
		}
		r.begin(context.Background(), true)
		for _, res := range r.owned {
			<-res.Done()
		}
		return nil
	})
}

// publishLocked sets, once, what StopGracefully returns. r.mu is held.
func (r *Runtime) publishLocked(err error) {
	if r.published {
		return
	}
	r.published = true
	r.result = err
	r.errs = append(r.errs, err)
	close(r.ended)
}

// fail keeps err for Err; nil is ignored.
func (r *Runtime) fail(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// wrap names the component or resource (kind) that failed to do op; nil
// stays nil.
func (r *Runtime) wrap(kind, name, op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("component: runtime %q: %s %q failed to %s: %w", r.Name(), kind, name, op, err)
}

// finish runs once, at the physical end, before Done closes: it fixes Err.
func (r *Runtime) finish() {
	r.mu.Lock()
	r.publishLocked(nil)
	errs := slices.DeleteFunc(slices.Clone(r.errs), func(err error) bool { return err == nil })
	r.mu.Unlock()
	seen := errors.Join(errs...)
	for i, c := range r.components {
		err := protect(c.Err)
		if err != nil && !errors.Is(seen, err) {
			errs = append(errs, fmt.Errorf("component: runtime %q: component %q: %w", r.Name(), r.names[i], err))
		}
	}
	if len(errs) == 1 {
		r.life.Record(errs[0]) // as it was returned
		return
	}
	r.life.Record(errors.Join(errs...))
}

// Run is the one-call lifecycle: Prepare(ctx), Start, then wait until the
// Runtime is done (finite work) and return Err(), or until ctx ends and then
// stop gracefully within the shutdown timeout and return the stop's result.
// A Prepare or Start failure force-stops the Runtime and is returned. It
// returns once Done closed; a component whose goroutines outlive a force by
// another shutdown timeout makes it return before, with an error wrapping
// ErrShutdownTimeout.
func (r *Runtime) Run(ctx context.Context) error { return Run(ctx, r, r.timeout, nil) }

// protect returns f's error, or f's panic as a *PanicError; a
// runtime.Goexit of f is recorded before the goroutine unwinds.
func protect(f func() error) error { return Call(f, nil) }

// isPanic reports whether err holds a recovered panic.
func isPanic(err error) bool {
	var p *PanicError
	return errors.As(err, &p)
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
