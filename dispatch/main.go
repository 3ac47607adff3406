package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/internal/panics"
)

// errChildStopped is the reason given for an exchange routed to a child that
// had already stopped (after its own failure under StopOnError).
var errChildStopped = fmt.Errorf("%w: child dispatcher stopped", ErrStopped)

// MainDispatcher routes one source carrying the exchanges of several named
// aggregates to one child Dispatcher per named aggregate, each on its own
// scheduler from one SchedulerSupplier, so that a busy aggregate type cannot
// take the goroutines of another. It is Wow's MainDispatcher
// (MainDispatcher.kt) with its children built like EventStreamDispatcher's.
//
// Routing is by aggregate.Materialize(x.AggregateID()); an exchange of a
// named aggregate without a child is discarded with ErrUnknownAggregate
// (reported to the discard hook and the Observer). Each child is fed through
// a channel of the group buffer's capacity; since one source feeds them all,
// a child whose buffers are full holds the router back (backpressure): the
// other children then wait for input, never for goroutines.
//
// Ownership: the MainDispatcher owns the supplier, like Wow's
// MainDispatcher subclasses (stopManagedGracefully / forceStopManaged): the
// children borrow it, and it is stopped once, after every child stopped (on
// ForceStop, at once).
//
// Lifecycle as Dispatcher's: Prepare prepares the children in order, Start
// starts them in order and then opens the intake, Quiesce closes the intake
// (the children drain what was routed to them and stop), ForceStop
// force-stops the children in reverse order. Done is closed when every
// child and scheduler goroutine has exited. All methods are safe for
// concurrent use.
type MainDispatcher[T aggregate.IDCapable] struct {
	source   flux.Flux[T]
	supplier ownedSupplier
	children []*Dispatcher[T]
	inboxes  []chan T
	routes   map[aggregate.MaterializedNamedAggregate]int
	discard  func(T, error)
	opts     options
	lifecycle

	received, failed, discarded atomic.Int64
}

// ownedSupplier is a supplier its holder stops: an *aggregate.Supplier.
type ownedSupplier interface {
	aggregate.SchedulerSupplier
	StopGracefully(ctx context.Context) error
	ForceStop()
}

// NewMain returns a MainDispatcher named name with one child per named
// aggregate (the children are named "<name>-<aggregate name>"), all handling
// exchanges with handler and configured by opts (parallelism, group buffer,
// error policy, observer, discard hook, group key, logger; WithScheduler and
// WithSchedulerSupplier are refused: the children's schedulers come from
// supplier). It starts nothing. An empty name, a nil handler or supplier, or a
// named aggregate listed twice returns ErrInvalidArgument; other errors are
// New's. Wow: MainDispatcher's constructor and newAggregateDispatcher.
func NewMain[T aggregate.IDCapable](name string, named []aggregate.NamedAggregate, source flux.Flux[T],
	handler Handler[T], supplier ownedSupplier, opts ...Option) (*MainDispatcher[T], error) {
	if name == "" || handler == nil || supplier == nil {
		return nil, fmt.Errorf("%w: a main dispatcher needs a name, a handler and a supplier", ErrInvalidArgument)
	}
	m := &MainDispatcher[T]{
		source: source, supplier: supplier, opts: newOptions(opts),
		routes:    make(map[aggregate.MaterializedNamedAggregate]int, len(named)),
		lifecycle: newLifecycle("main dispatcher", name),
	}
	switch {
	case m.opts.scheduler != nil || m.opts.supplier != nil:
		return nil, fmt.Errorf("%w: main dispatcher %q: its children take their schedulers from its supplier", ErrInvalidOption, name)
	case m.opts.parallelism < 1:
		// Checked here too: without named aggregates no child checks it.
		return nil, fmt.Errorf("%w: main dispatcher %q: got %d", ErrInvalidParallelism, name, m.opts.parallelism)
	case len(m.opts.invalid) > 0:
		return nil, naming("main dispatcher", name, errors.Join(m.opts.invalid...))
	}
	m.opts.observer = guard(m.opts.observer, m.opts.logger, name)
	var err error
	if m.discard, err = typed[func(T, error)](m.opts.discardHook, "WithDiscardHook"); err != nil {
		return nil, naming("main dispatcher", name, err)
	}
	childOpts := append(slices.Clone(opts), WithSchedulerSupplier(supplier), withFailureHook(m.fail))
	if m.opts.groupKey == nil {
		// T's method is reachable without an interface here: no allocation.
		p := m.opts.parallelism
		childOpts = append(childOpts, WithGroupKey(func(x T) int { return x.AggregateID().Mod(p) }))
	}
	for _, n := range named {
		key := aggregate.Materialize(n)
		if _, dup := m.routes[key]; dup || n == nil {
			return nil, fmt.Errorf("%w: main dispatcher %q: named aggregate %v is nil or listed twice", ErrInvalidArgument, name, key)
		}
		inbox := make(chan T, m.opts.groupBuffer)
		child, err := New(name+"-"+key.Aggregate, key, flux.FromChannel(inbox), handler, childOpts...)
		if err != nil {
			return nil, naming("main dispatcher", name, err)
		}
		m.routes[key] = len(m.children)
		m.children = append(m.children, child)
		m.inboxes = append(m.inboxes, inbox)
	}
	return m, nil
}

// withFailureHook makes a child report its failures under StopOnError to its
// MainDispatcher, which then stops routing.
func withFailureHook(f func(error)) Option {
	return func(o *options) { o.failed = f }
}

// Stats sums the children's counters with the exchanges the router
// received and discarded itself (unknown aggregates, and exchanges left in a
// stopped child's channel). The identity of Stats holds; InFlight includes
// the exchanges in the channels.
func (m *MainDispatcher[T]) Stats() Stats {
	var s Stats
	for _, c := range m.children {
		cs := c.Stats()
		s.Succeeded += cs.Succeeded
		s.Failed += cs.Failed
		s.Discarded += cs.Discarded
	}
	s.Failed += m.failed.Load()
	s.Discarded += m.discarded.Load()
	s.Received = m.received.Load() // last: every final count was received first
	s.InFlight = s.Received - s.Succeeded - s.Failed - s.Discarded
	return s
}

// Prepare prepares the children in order, then subscribes the router on a
// goroutine of its own with the intake closed. It may be called once, from
// StateNew, else ErrIllegalState. If a child fails to prepare, the
// MainDispatcher force-stops itself and returns the error. Wow:
// MainDispatcher.prepare.
func (m *MainDispatcher[T]) Prepare(ctx context.Context) error {
	m.mu.Lock()
	if m.state != StateNew {
		defer m.mu.Unlock()
		return m.illegal("prepare")
	}
	m.state = StatePrepared
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m.runCancel = cancel
	m.mu.Unlock()
	// run, started whatever happens, is what closes done.
	defer func() { go m.run(runCtx) }()
	for _, c := range m.children {
		if err := c.Prepare(ctx); err != nil {
			m.ForceStop()
			return naming("main dispatcher", m.name, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forced {
		return fmt.Errorf("%w: main dispatcher %q was force-stopped while preparing", ErrStopped, m.name)
	}
	return nil
}

// Start starts the children in order, then opens the intake. From
// StatePrepared it moves to StateRunning; a no-op when running or stopped;
// ErrIllegalState from StateNew and StateStopping. Wow: MainDispatcher.start.
func (m *MainDispatcher[T]) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.state {
	case StateRunning, StateStopped:
		return nil
	case StatePrepared:
	default:
		return m.illegal("start")
	}
	for _, c := range m.children {
		if err := c.Start(); err != nil {
			return naming("main dispatcher", m.name, err)
		}
	}
	m.state = StateRunning
	m.valve.open()
	return nil
}

// Quiesce closes the intake at once; what was routed drains through the
// children, which then stop. Prompt, non-blocking, idempotent. Wow:
// MainDispatcher.quiesce.
func (m *MainDispatcher[T]) Quiesce() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.valve.shut()
	switch m.state {
	case StateNew:
		m.stopUnpreparedLocked()
	case StatePrepared:
		// The children never started: they end empty.
		for _, c := range m.children {
			c.Quiesce()
		}
		m.state = StateStopping
	case StateRunning:
		m.state = StateStopping
	}
}

// stopUnpreparedLocked stops a MainDispatcher that has no goroutine.
func (m *MainDispatcher[T]) stopUnpreparedLocked() {
	for _, c := range slices.Backward(m.children) {
		c.ForceStop()
	}
	m.supplier.ForceStop() // it lent nothing yet: there is nothing to drain
	m.state = StateStopped
	close(m.done)
}

// StopGracefully quiesces, then waits until Done is closed (nil, or Err())
// or ctx ends (ctx.Err(); the draining goes on). As Dispatcher's, it begins
// the stop itself, unlike Wow's.
func (m *MainDispatcher[T]) StopGracefully(ctx context.Context) error {
	m.Quiesce()
	return m.await(ctx)
}

// ForceStop stops the router, force-stops the children in reverse order and
// then the supplier, without waiting. Idempotent, safe before Prepare and
// concurrently with any method. Wow: MainDispatcher.forceStop.
func (m *MainDispatcher[T]) ForceStop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forced {
		return
	}
	m.forced = true
	m.valve.shut()
	switch {
	case m.state == StateNew:
		m.stopUnpreparedLocked()
		return
	case m.runCancel == nil:
		return // stopped before Prepare (Quiesce from NEW): nothing runs
	}
	m.state = StateStopped
	m.runCancel(ErrForceStopped)
	for _, c := range slices.Backward(m.children) {
		c.ForceStop()
	}
	m.supplier.ForceStop()
}

// fail is the children's failure hook under StopOnError: record and stop
// routing.
func (m *MainDispatcher[T]) fail(err error) {
	m.record(err)
	m.Quiesce()
}

// run routes until the source ends, then closes the children's channels,
// waits for the children in reverse order, accounts for what a stopped child
// left in its channel, and stops the supplier.
func (m *MainDispatcher[T]) run(ctx context.Context) {
	defer close(m.done)
	err := flow(m.valve, ctx, m.source, func(x T) error { return m.route(ctx, x) },
		func(x T) {
			m.received.Add(1)
			m.drop(x, causeOr(ctx, errIntakeClosed))
		})
	if err != nil && ctx.Err() == nil {
		m.record(fmt.Errorf("dispatch: main dispatcher %q: source failed: %w", m.name, err))
	}
	for _, in := range m.inboxes {
		close(in)
	}
	for i, c := range slices.Backward(m.children) {
		<-c.Done()
		if err := c.Err(); err != nil {
			m.record(err)
		}
		for x := range m.inboxes[i] {
			m.drop(x, causeOr(ctx, errChildStopped))
		}
	}
	m.mu.Lock()
	forced := m.forced
	m.state = StateStopped
	m.mu.Unlock()
	if forced {
		m.supplier.ForceStop()
	}
	if err := m.supplier.StopGracefully(context.Background()); err != nil {
		m.record(fmt.Errorf("dispatch: main dispatcher %q: supplier: %w", m.name, err))
	}
}

// route hands x to its child, waiting while the child's channel is full. An
// exchange whose AggregateID panics (a nil pointer, say) fails alone, as a
// Dispatcher's invalid group key does; the router goes on.
func (m *MainDispatcher[T]) route(ctx context.Context, x T) error {
	m.received.Add(1)
	named, err := m.namedOf(x)
	if err != nil {
		m.failed.Add(1)
		m.opts.observer.Finished(OutcomeError, 0, err)
		logFailure(m.opts.logger, m.name, OutcomeError, err)
		if m.opts.policy == StopOnError {
			m.fail(err)
		}
		return nil
	}
	i, ok := m.routes[named]
	if !ok {
		m.drop(x, fmt.Errorf("%w: %v", ErrUnknownAggregate, named))
		return nil
	}
	select {
	case m.inboxes[i] <- x:
		return nil
	case <-m.children[i].Done():
		m.drop(x, causeOr(ctx, errChildStopped))
		return nil
	case <-ctx.Done():
		m.drop(x, context.Cause(ctx))
		return context.Cause(ctx)
	}
}

// namedOf returns the named aggregate x is routed by, recovering a panic of
// x.AggregateID into an ErrInvalidGroupKey error.
func (m *MainDispatcher[T]) namedOf(x T) (named aggregate.MaterializedNamedAggregate, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: main dispatcher %q: AggregateID panicked: %w", ErrInvalidGroupKey, m.name, panics.New(v))
		}
	}()
	return aggregate.Materialize(x.AggregateID()), nil
}

// drop accounts for an exchange the router received and did not hand over.
func (m *MainDispatcher[T]) drop(x T, reason error) {
	m.discarded.Add(1)
	m.opts.observer.Discarded(reason)
	if m.discard != nil {
		m.discard(x, reason)
	}
}
