package dispatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/internal/fastmod"
	"github.com/aggflow/aggflow/schedulers"
)

// PanicError is a handler's (or group key function's) recovered panic: the
// panic value and the stack. It is the same type as schedulers.PanicError
// and flux.PanicError: component.PanicError.
type PanicError = component.PanicError

// Source is where a dispatcher pulls its exchanges from: a flux.Flux[T]
// (flux.FromObservable makes one of an rxgo Observable), or any type with
// the same Subscribe. Subscribe pushes the exchanges one at a time by
// calling emit (never concurrently), blocking in emit being the
// backpressure; an emit that returns an error means "stop", and Subscribe
// should return soon after, as it should once ctx is done.
type Source[T any] interface {
	Subscribe(ctx context.Context, emit func(T) error) error
}

// BatchSource returns a Source that hands its exchanges over a batch at a
// time, as a broker client fetches them: subscribe calls emit with each
// batch, in order, never concurrently, and should return once ctx is done
// or emit returned an error. A dispatcher takes the exchanges of a batch in
// order, exactly as one at a time, but publishes each group's share of the
// batch to its group at once, at the batch's end (or before it waits for
// room in the pending budget): one hand-off per group touched rather than
// one per exchange. emit returns nil, or once an exchange of the batch is
// refused (the intake shut, or ctx ended while it waited for room), that
// error, the rest of the batch being refused with it (each counted and
// discarded). emit does not keep the slice. Used as a plain Source
// elsewhere, it emits the exchanges one at a time. With a nil subscribe
// its Subscribe returns ErrInvalidArgument: the dispatcher's source error.
func BatchSource[T any](subscribe func(ctx context.Context, emit func([]T) error) error) Source[T] {
	return batchSource[T]{subscribe: subscribe}
}

// batchSource is BatchSource's: the intake recognises its type.
type batchSource[T any] struct {
	subscribe func(ctx context.Context, emit func([]T) error) error
}

// Subscribe emits each exchange of each batch in turn.
func (s batchSource[T]) Subscribe(ctx context.Context, emit func(T) error) error {
	if s.subscribe == nil {
		return fmt.Errorf("%w: BatchSource: subscribe is nil", ErrInvalidArgument)
	}
	return s.subscribe(ctx, func(xs []T) error {
		for _, x := range xs {
			if err := emit(x); err != nil {
				return err
			}
		}
		return nil
	})
}

// Handler handles one exchange. ctx carries the values of Prepare's ctx; it
// is cancelled, with cause ErrForceStopped, by ForceStop (or with the
// scheduler's cause when its owner disposes it by force), and is done once
// the dispatcher's Done closed. A returned error or a panic is the
// exchange's failure, handled by the ErrorPolicy; it never stops the other
// exchanges under Continue. A handler that calls runtime.Goexit fails its
// exchange (OutcomePanic wrapping schedulers.ErrGoexit); its group goes on.
type Handler[T any] func(ctx context.Context, exchange T) error

// Dispatcher handles the exchanges of one named aggregate so that the
// exchanges of one group are handled one at a time in arrival order, while
// groups run concurrently on the named aggregate's scheduler. The package
// documentation gives the path of one exchange.
//
// Ordering contract: the exchanges of one group (one aggregate id always
// falls in the same group) are handled one at a time, in the order the
// intake admitted them; the next starts only after the handler of the
// previous one returned. Groups run concurrently, at most the scheduler's
// parallelism at once. Nothing else is ordered.
//
// Exchanges come from a Source, subscribed on the one goroutine the
// dispatcher owns and handed to the groups on that goroutine, or, with a
// nil source, are pushed with Emit or EmitBatch.
//
// Lifecycle (docs/lifecycle.md has the whole contract): New starts nothing.
// Prepare resolves the scheduler; nothing is pulled before Start. Quiesce
// shuts the intake and lets the admitted exchanges drain; StopGracefully is
// Quiesce and a wait; ForceStop drops what has not started and cancels the
// handlers' context; Run is the one-call form. The dispatcher stops by
// itself once its source ended and every exchange ended. All methods are
// safe for concurrent use.
type Dispatcher[T any] struct {
	intake[T]
	cfg config[T]
}

// New returns a Dispatcher named name for the exchanges of named, routed by
// their aggregate id: group = x.AggregateID().Mod(groups), computed without
// allocating. It pulls from source, or, when source is nil, takes what Emit
// pushes. It starts nothing. An empty name, a nil handler, or a named
// aggregate that is nil or has an empty context or aggregate name returns
// ErrInvalidArgument naming the argument; a parallelism below 1,
// ErrInvalidParallelism; an invalid option, ErrInvalidOption. An exchange
// whose aggregate id is empty fails alone with ErrInvalidGroupKey.
//
// AggregateID runs on the source's goroutine, or on Emit's and EmitBatch's
// caller's; its panic fails its exchange alone with ErrInvalidGroupKey. An
// exchange that holds its id as an aggregate.Key (hashed once) is routed
// faster by its AggregateKey: see WithAggregateKey.
//
// Handlers that block need another scheduler. Without WithScheduler or
// WithSchedulerSupplier, Prepare makes a schedulers.NewParallel of
// schedulers.DefaultPoolSize goroutines (the CPU count): right for handlers
// that compute, but a handler that blocks (I/O, a lock, a sleep) holds one
// of those goroutines while it waits, so that a few blocked handlers stall
// every group. Run blocking handlers on a schedulers.NewBoundedElastic
// (WithScheduler, or a supplier's aggregate.WithSchedulerFactory), whose
// goroutines grow on demand to its cap: a dispatcher uses at most one per
// group running at once.
func New[T aggregate.IDCapable](name string, named aggregate.NamedAggregate, source Source[T],
	handler Handler[T], opts ...Option[T]) (*Dispatcher[T], error) {
	d, err := build(name, named, source, handler, newConfig(opts), nil)
	if err != nil {
		return nil, err
	}
	e := d.engines[0]
	e.idOf = func(x T) aggregate.ID { return x.AggregateID() }
	var key func(T) aggregate.Key
	if d.cfg.byKey {
		if key = keyOf[T](); key == nil {
			return nil, fmt.Errorf("%w: dispatcher %q: WithAggregateKey: %s has no method AggregateKey() aggregate.Key",
				ErrInvalidOption, name, typeName[T]())
		}
	}
	d.route = func(x T) (*engine[T], int, aggregate.Key, error) { // Emit's
		g, k, err := routeByID(name, x, key, e.groups)
		return e, g, k, err
	}
	d.emitFn = emitByID(&d.intake, e, key) // the source's: the route inline
	d.keyFn = "AggregateID"
	if key != nil {
		d.keyFn = "AggregateKey"
	}
	return d, nil
}

// routeByID returns x's group among groups (aggregate.GroupKey's) and the
// key of its aggregate id, or ErrInvalidGroupKey for an empty id: by key(x)
// when key is not nil (keyOf's: hashed when it was made), else by
// AggregateID, hashed here once for the group and WithKeyOrdering's index.
// Both are user code: their panic is the caller's.
func routeByID[T aggregate.IDCapable](name string, x T, key func(T) aggregate.Key, groups fastmod.Divisor) (int, aggregate.Key, error) {
	var k aggregate.Key
	if key != nil {
		k = key(x)
	} else {
		k = aggregate.NewKey(x.AggregateID().ID)
	}
	if k.ID() == "" {
		return 0, aggregate.Key{}, errEmptyID(name)
	}
	return groups.FloorMod(k.HashCode()), k, nil
}

var keyCapable = reflect.TypeFor[aggregate.KeyCapable]()

// keyOf returns T's AggregateKey method as a function when T implements
// aggregate.KeyCapable, else nil (WithAggregateKey's route). A type
// parameter constrained by IDCapable cannot call it directly, and converting
// each exchange of a concrete type to an interface would allocate; the
// method's function, taken once here, is one indirect call, as AggregateID
// is. An interface T's exchanges are interface values already: asserting one
// is an itab look-up, no copy.
func keyOf[T any]() func(T) aggregate.Key {
	t := reflect.TypeFor[T]()
	switch {
	case !t.Implements(keyCapable):
		return nil
	case t.Kind() == reflect.Interface:
		return func(x T) aggregate.Key { return any(x).(aggregate.KeyCapable).AggregateKey() }
	}
	m, _ := t.MethodByName("AggregateKey")
	f, _ := m.Func.Interface().(func(T) aggregate.Key)
	return f
}

// NewKeyed is New for exchanges routed by key, which gives each its group
// in [0, groups) (see WithParallelism). An exchange whose key is out of
// range, or whose key function panics, fails alone with ErrInvalidGroupKey.
// A nil key returns ErrInvalidArgument.
func NewKeyed[T any](name string, named aggregate.NamedAggregate, source Source[T],
	key func(T) int, handler Handler[T], opts ...Option[T]) (*Dispatcher[T], error) {
	if key == nil {
		return nil, fmt.Errorf("%w: dispatcher %q needs a key function", ErrInvalidArgument, name)
	}
	return build(name, named, source, handler, newConfig(opts), key)
}

// build validates and assembles a Dispatcher routed by key; with a nil key
// the caller sets the route.
func build[T any](name string, named aggregate.NamedAggregate, source Source[T], handler Handler[T],
	cfg config[T], key func(T) int) (*Dispatcher[T], error) {
	if err := checkArguments("dispatcher", name, handler != nil, named); err != nil {
		return nil, err
	}
	switch {
	case cfg.groups < 1:
		return nil, fmt.Errorf("%w: dispatcher %q: got %d", ErrInvalidParallelism, name, cfg.groups)
	case len(cfg.invalid) > 0:
		return nil, naming("dispatcher", name, errors.Join(cfg.invalid...))
	case cfg.scheduler != nil && cfg.supplier != nil:
		return nil, fmt.Errorf("%w: dispatcher %q: WithScheduler and WithSchedulerSupplier exclude each other", ErrInvalidOption, name)
	case cfg.perKey && key != nil && cfg.keyOf == nil:
		return nil, fmt.Errorf("%w: dispatcher %q: WithKeyOrdering orders by aggregate id (New, NewMain); NewKeyed takes WithKeyOrderingBy", ErrInvalidOption, name)
	case cfg.keyOf != nil && key == nil:
		return nil, fmt.Errorf("%w: dispatcher %q: WithKeyOrderingBy is NewKeyed's; New orders by aggregate id (WithKeyOrdering)", ErrInvalidOption, name)
	case cfg.byKey && key != nil:
		return nil, fmt.Errorf("%w: dispatcher %q: WithAggregateKey is New's; NewKeyed routes by its key function", ErrInvalidOption, name)
	}
	d := &Dispatcher[T]{cfg: cfg}
	e := newEngine(name, named, handler, &d.cfg).withLanes(cfg.groups)
	d.init("dispatcher", name, source, &d.cfg, []*engine[T]{e}, e)
	if key != nil {
		d.keyFn = "key function"
		keyOf := cfg.keyOf
		d.route = func(x T) (*engine[T], int, aggregate.Key, error) {
			g, err := groupKey(name, key, len(e.lanes), x)
			if err != nil || keyOf == nil {
				return e, g, aggregate.Key{}, err
			}
			return e, g, aggregate.NewKey(keyOf(x)), nil // hashed for WithKeyOrderingBy's index
		}
	}
	return d, nil
}

// newEngine returns the engine of one named aggregate, without lanes
// (withLanes gives them), scheduler or flow; its context is a placeholder
// until Prepare makes the real one.
func newEngine[T any](name string, named aggregate.NamedAggregate, handler Handler[T], cfg *config[T]) *engine[T] {
	e := &engine[T]{
		name: name, named: aggregate.Materialize(named),
		handler: handler, contextOf: cfg.contextOf, logger: cfg.logger, failLevel: cfg.failLevel,
		policy: cfg.policy, epoch: time.Now(),
		obs:   guard(cfg.observers, cfg.logger, name),
		hooks: hooks[T]{outcomes: cfg.outcomes, discards: cfg.discards, g: newGuardian(cfg.logger, name, "hook")},
	}
	e.labels = Labels{Dispatcher: name, Aggregate: e.named}
	e.timed = e.obs != nil || e.hooks.handled()
	if cfg.perKey {
		e.keys = newKeyTable[T]()
	}
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	return e
}

// withLanes gives e its lanes.
func (e *engine[T]) withLanes(groups int) *engine[T] {
	e.lanes = make([]atomic.Pointer[lane[T]], groups)
	e.groups = fastmod.New(groups)
	e.chunks.Keep = idleKeep
	return e
}

// idleKeep is how many of an engine's lanes keep their chunk of slots when
// they go idle, so that the lanes of a dispatcher with few groups, which
// go idle and busy in turn, do not give a chunk back and take one again at
// every turn; beyond them an idle lane holds no slot. At most 128 chunks
// (for a 96-byte exchange, 440 KiB) per named aggregate.
const idleKeep = 128

// groupKey returns x's group, failing it with ErrInvalidGroupKey when the
// key function returns a key outside [0, groups). Its panic is the intake's.
func groupKey[T any](name string, key func(T) int, groups int, x T) (int, error) {
	g := key(x)
	if g < 0 || g >= groups {
		return 0, fmt.Errorf("%w: dispatcher %q: key %d not in [0, %d)", ErrInvalidGroupKey, name, g, groups)
	}
	return g, nil
}

// checkArguments refuses an empty name, a nil handler (hasHandler false),
// and a named aggregate that is nil or has an empty context or aggregate
// name, each error naming the argument at fault.
func checkArguments(kind, name string, hasHandler bool, named ...aggregate.NamedAggregate) error {
	if name == "" {
		return fmt.Errorf("%w: the %s's name is empty", ErrInvalidArgument, kind)
	}
	if !hasHandler {
		return fmt.Errorf("%w: %s %q: the handler is nil", ErrInvalidArgument, kind, name)
	}
	for _, n := range named {
		if n == nil {
			return fmt.Errorf("%w: %s %q: a named aggregate is nil", ErrInvalidArgument, kind, name)
		}
		if m := aggregate.Materialize(n); m.Context == "" || m.Aggregate == "" {
			return fmt.Errorf("%w: %s %q: named aggregate %q/%q has an empty context or aggregate name", ErrInvalidArgument, kind, name, m.Context, m.Aggregate)
		}
	}
	return nil
}

// errEmptyID fails an exchange whose aggregate id is empty: it names no
// aggregate, so it has no order to keep.
func errEmptyID(name string) error {
	return fmt.Errorf("%w: dispatcher %q: empty aggregate id", ErrInvalidGroupKey, name)
}

// naming adds the component (kind and name) to one of this package's
// errors, whose message already starts with "dispatch: ".
func naming(kind, name string, err error) error {
	return fmt.Errorf("%w (%s %q)", err, kind, name)
}

// Prepare resolves the scheduler: WithScheduler's, the supplier's, or one
// the dispatcher makes (with its logger) and owns. ctx's values (not its
// cancellation) reach the source and the handlers. No lock is held while a
// supplier works, so a stop meanwhile returns at once and Prepare then
// returns an error wrapping ErrStopped. It may be called once, from
// component.StateNew, else ErrIllegalState; a supplier's error is returned and the
// dispatcher stays in component.StateNew.
func (d *Dispatcher[T]) Prepare(ctx context.Context) error {
	return d.prepare(ctx, func() (schedulers.Scheduler, error) {
		e := d.engines[0]
		switch {
		case d.cfg.scheduler != nil:
			e.sched = d.cfg.scheduler
			return nil, nil
		case d.cfg.supplier != nil:
			s, err := getScheduler(d.cfg.supplier, e.named)
			e.sched = s
			return nil, err
		}
		s, err := schedulers.NewParallel(d.Name()+"-"+e.named.Aggregate, schedulers.DefaultPoolSize,
			schedulers.WithLogger(d.cfg.logger))
		if err != nil {
			return nil, err // s is a nil *Parallel: keep it out of the interfaces
		}
		e.sched = s
		return s, nil
	})
}

// Run prepares and starts the dispatcher, then waits until it stopped by
// itself (its source ended) or ctx ended; then it stops gracefully within
// WithStopTimeout and forces what is left. It returns the first error, once
// Done closed: every handler returned and every outcome hook was called.
// Only handlers that ignore their cancelled ctx for another WithStopTimeout
// after the force make it return before, with an error wrapping
// ErrShutdownTimeout that says how many are in flight.
func (d *Dispatcher[T]) Run(ctx context.Context) error {
	return component.Run(ctx, d, d.timeout, d.inFlight)
}

// inFlight says, for Run's error after a force that handlers outlived, how
// many exchanges are still in flight.
func (in *intake[T]) inFlight() string {
	return fmt.Sprintf("%d in flight", in.Stats().InFlight)
}
