package otelmetrics

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Dispatcher is the interface the gauges read, of three methods: Name()
// string, Stats() dispatch.Stats and Budget() (pending, max int64). Every
// dispatcher type of package dispatch (Dispatcher, MainDispatcher) has them,
// and any other type with them may be registered.
type Dispatcher = adapter.Dispatcher

// Register makes the gauges report d, by its name, until the returned
// Registration's Unregister: a callback of the Meter reads d.Stats() and
// d.Budget() (atomic loads) at each collection. Name is read once, here. A
// nil d, an empty name or a Name that panics returns ErrInvalidArgument; a
// name registered already, ErrDuplicate (one label set, one value); a meter
// that refuses the callback, ErrMeter. A panic of d's methods during a
// collection is that callback's error, wrapping a *PanicError; the other
// dispatchers are still collected. Safe for concurrent use; Unregister is
// idempotent.
func (o *Observer) Register(d Dispatcher) (metric.Registration, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil dispatcher", ErrInvalidArgument)
	}
	name, err := adapter.NameOf(d)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: dispatcher's Name: %w", ErrInvalidArgument, err)
	case name == "":
		return nil, fmt.Errorf("%w: dispatcher with an empty name", ErrInvalidArgument)
	case !o.names.Add(name, struct{}{}):
		return nil, fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(DispatcherKey.String(name)))
	reg, err := o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		g, err := adapter.Read(d)
		if err != nil {
			return fmt.Errorf("otelmetrics: reading dispatcher %q: %w", name, err)
		}
		obs.ObserveInt64(o.inFlight, g.InFlight, attrs)
		obs.ObserveInt64(o.pending, g.Pending, attrs)
		obs.ObserveInt64(o.limit, g.Limit, attrs)
		return nil
	}, o.inFlight, o.pending, o.limit)
	if err != nil {
		o.names.Remove(name)
		return nil, fmt.Errorf("%w: dispatcher %q: %w", ErrMeter, name, err)
	}
	return &registration{reg: reg, release: func() { o.names.Remove(name) }}, nil
}

// registration unregisters the callback and frees the name, once.
type registration struct {
	embedded.Registration
	reg     metric.Registration
	release func()
	once    sync.Once
	err     error
}

// Unregister stops reporting the dispatcher; later calls return the first
// call's result.
func (r *registration) Unregister() error {
	r.once.Do(func() {
		r.err = r.reg.Unregister()
		r.release()
	})
	return r.err
}
