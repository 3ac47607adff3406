package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/schedulers"
)

// MainDispatcher routes one source carrying the exchanges of several named
// aggregates to one set of lanes per named aggregate, each on its own
// scheduler from one SchedulerSupplier, so that a busy aggregate type cannot
// take the goroutines of another.
//
// Routing is by aggregate.Materialize(x.AggregateID()), then group =
// x.AggregateID().Mod(groups) within that aggregate's lanes, on the
// source's goroutine: no router goroutine, no channel per child. An
// exchange of a named aggregate without lanes is discarded with
// ErrUnknownAggregate; one whose AggregateID panics fails with
// ErrInvalidGroupKey. All named aggregates share one pending budget, so one
// slow aggregate type delays the others only once the whole budget is used.
//
// Named aggregates are independent: when one's scheduler refuses work or
// ends under the MainDispatcher (its owner disposes it), that named
// aggregate alone is retired: its running handlers' ctx is cancelled (by a
// forced disposal), what its lanes hold and what of it arrives later is
// discarded with ErrRejected (counted, given to the hooks), the others go
// on and the source is not cut; Err reports the retirement once Done
// closed. The MainDispatcher stops with that error once every named
// aggregate is retired.
//
// Ownership: the supplier is lent; its owner stops it after the
// MainDispatcher stopped (a Runtime owning it does so: WithOwned).
//
// Lifecycle as Dispatcher's; Stats sums over every named aggregate. All
// methods are safe for concurrent use.
type MainDispatcher[T aggregate.IDCapable] struct {
	intake[T]
	cfg      config[T]
	supplier aggregate.SchedulerSupplier
}

// NewMain returns a MainDispatcher named name for the exchanges of the given
// named aggregates, pulled from source (or pushed with Emit when source is
// nil), all handled by handler and configured by opts; WithScheduler and
// WithSchedulerSupplier are refused (the schedulers come from supplier). It
// starts nothing. An empty name, a nil handler or supplier, or a named
// aggregate that is nil, has an empty context or aggregate name or is
// listed twice returns ErrInvalidArgument naming it; other errors and the
// exchanges with an empty aggregate id are as with New.
func NewMain[T aggregate.IDCapable](name string, named []aggregate.NamedAggregate, source Source[T],
	handler Handler[T], supplier aggregate.SchedulerSupplier, opts ...Option[T]) (*MainDispatcher[T], error) {
	if err := checkArguments("main dispatcher", name, handler != nil, named...); err != nil {
		return nil, err
	}
	if supplier == nil {
		return nil, fmt.Errorf("%w: main dispatcher %q: the supplier is nil", ErrInvalidArgument, name)
	}
	m := &MainDispatcher[T]{cfg: newConfig(opts), supplier: supplier}
	switch {
	case m.cfg.scheduler != nil || m.cfg.supplier != nil:
		return nil, fmt.Errorf("%w: main dispatcher %q: its schedulers come from its supplier", ErrInvalidOption, name)
	case m.cfg.groups < 1:
		return nil, fmt.Errorf("%w: main dispatcher %q: got %d", ErrInvalidParallelism, name, m.cfg.groups)
	case len(m.cfg.invalid) > 0:
		return nil, naming("main dispatcher", name, errors.Join(m.cfg.invalid...))
	case m.cfg.keyOf != nil:
		return nil, fmt.Errorf("%w: main dispatcher %q: WithKeyOrderingBy is NewKeyed's; NewMain orders by AggregateID (WithKeyOrdering)", ErrInvalidOption, name)
	case m.cfg.byKey:
		return nil, fmt.Errorf("%w: main dispatcher %q: WithAggregateKey is New's; NewMain routes by AggregateID, which names the aggregate type", ErrInvalidOption, name)
	}
	routes := make(map[aggregate.MaterializedNamedAggregate]*engine[T], len(named))
	engines := make([]*engine[T], 0, len(named))
	for _, n := range named {
		key := aggregate.Materialize(n)
		if _, dup := routes[key]; dup {
			return nil, fmt.Errorf("%w: main dispatcher %q: named aggregate %v is listed twice", ErrInvalidArgument, name, key)
		}
		e := newEngine(name+"-"+key.Aggregate, key, handler, &m.cfg).withLanes(m.cfg.groups)
		e.idOf = func(x T) aggregate.ID { return x.AggregateID() }
		routes[key] = e
		engines = append(engines, e)
	}
	report := newEngine(name, aggregate.MaterializedNamedAggregate{}, handler, &m.cfg)
	m.init("main dispatcher", name, source, &m.cfg, engines, report)
	m.keyFn = "AggregateID"
	m.route = func(x T) (*engine[T], int, aggregate.Key, error) {
		id := x.AggregateID()
		if id.ID == "" {
			return nil, 0, aggregate.Key{}, errEmptyID(name)
		}
		e, ok := routes[aggregate.Materialize(id)]
		if !ok {
			return nil, 0, aggregate.Key{}, fmt.Errorf("%w: %v", ErrUnknownAggregate, aggregate.Materialize(id))
		}
		k := aggregate.NewKey(id.ID)
		return e, e.groups.FloorMod(k.HashCode()), k, nil // aggregate.GroupKey's group
	}
	return m, nil
}

// Prepare takes each named aggregate's scheduler from the supplier, in
// order, holding no lock meanwhile. It may be called once, from component.StateNew,
// else ErrIllegalState; a supplier's error is returned.
func (m *MainDispatcher[T]) Prepare(ctx context.Context) error {
	return m.prepare(ctx, func() (schedulers.Scheduler, error) {
		for _, e := range m.engines {
			s, err := getScheduler(m.supplier, e.named)
			if err != nil {
				return nil, fmt.Errorf("dispatch: %s: %w", e.named, err)
			}
			e.sched = s
		}
		return nil, nil
	})
}

// Run is Dispatcher.Run for a MainDispatcher.
func (m *MainDispatcher[T]) Run(ctx context.Context) error {
	return component.Run(ctx, m, m.timeout, m.inFlight)
}
