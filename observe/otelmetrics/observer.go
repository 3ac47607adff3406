package otelmetrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// ScopeName is the instrumentation scope of the Meter that New takes from
// its MeterProvider.
const ScopeName = "github.com/aggflow/aggflow/observe/otelmetrics"

// Observer is a dispatch.Observer that records a dispatcher's exchanges as
// OpenTelemetry instruments. "<ns>" is the namespace (default "aggflow"):
//
//	<ns>.exchanges              Int64Counter, {exchange}: exchanges ended,
//	                            by dispatcher, context, aggregate, outcome
//	<ns>.exchange.queue_wait    Float64Histogram, s: admission to handler start,
//	                            by dispatcher, context, aggregate
//	<ns>.exchange.handling      Float64Histogram, s: the handler's running time,
//	                            by dispatcher, context, aggregate, outcome
//	<ns>.exchanges.in_flight    Int64ObservableUpDownCounter, {exchange}:
//	                            Stats().InFlight, by dispatcher
//	<ns>.budget.pending         Int64ObservableUpDownCounter, {exchange}:
//	                            Budget()'s pending, by dispatcher
//	<ns>.budget.limit           Int64ObservableUpDownCounter, {exchange}:
//	                            Budget()'s limit, by dispatcher
//
// Outcomes are dispatch.Outcome's String values: success, error, panic,
// cancelled (Finished) and discarded (Discarded). Every exchange a
// dispatcher received is counted once in <ns>.exchanges; the handling
// histogram has one value per handled exchange (0 s for one refused before
// a handler, with outcome error), the queue wait one per handler started.
// The three gauges are UpDownCounters because they add up across
// dispatchers; they read, at collection, the dispatchers given to
// Register. The Labels of a MainDispatcher's exchanges name its child
// ("<main>-<aggregate>") while its gauges name the MainDispatcher itself.
//
// Give it to dispatchers with dispatch.WithObserver (one Observer may serve
// many dispatchers). Its methods run inline on the dispatchers' goroutines,
// concurrently: each takes one lock-free lookup of the Labels' attribute
// sets (built on the first event of each Labels) and one or two
// measurements, and allocates nothing once the Labels were seen (with the
// SDK; the measurement's cost is the MeterProvider's). ctx is passed to the
// measurements, so exemplars see the handler's span.
type Observer struct {
	meter     metric.Meter
	exchanges metric.Int64Counter
	queueWait metric.Float64Histogram
	handling  metric.Float64Histogram
	inFlight  metric.Int64ObservableUpDownCounter
	pending   metric.Int64ObservableUpDownCounter
	limit     metric.Int64ObservableUpDownCounter
	sets      *adapter.Cache[*labelSet]
	names     adapter.Registry[struct{}]
}

var _ dispatch.Observer = (*Observer)(nil)

// New returns an Observer whose instruments come from provider's Meter
// ScopeName. A nil provider returns ErrInvalidArgument; an invalid option,
// ErrInvalidOption; a meter that refuses an instrument, ErrMeter. It starts
// nothing and registers no callback until Register.
func New(provider metric.MeterProvider, opts ...Option) (*Observer, error) {
	if provider == nil {
		return nil, fmt.Errorf("%w: nil meter provider", ErrInvalidArgument)
	}
	cfg := adapter.NewConfig(DefaultNamespace, opts)
	if err := cfg.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	o := &Observer{meter: provider.Meter(ScopeName), sets: adapter.NewCache(newLabelSet)}
	if err := o.instruments(cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMeter, err)
	}
	return o, nil
}

// instruments creates the instruments of cfg on o.meter.
func (o *Observer) instruments(cfg config) error {
	ns, m := cfg.Namespace, o.meter
	var errs [6]error
	o.exchanges, errs[0] = m.Int64Counter(ns+".exchanges", metric.WithUnit("{exchange}"),
		metric.WithDescription("Exchanges ended, by outcome."))
	o.queueWait, errs[1] = m.Float64Histogram(ns+".exchange.queue_wait", metric.WithUnit("s"),
		metric.WithDescription("Time an exchange waited from admission to its handler's start."),
		metric.WithExplicitBucketBoundaries(cfg.QueueWait...))
	o.handling, errs[2] = m.Float64Histogram(ns+".exchange.handling", metric.WithUnit("s"),
		metric.WithDescription("Running time of the handler, by outcome."),
		metric.WithExplicitBucketBoundaries(cfg.Handling...))
	o.inFlight, errs[3] = m.Int64ObservableUpDownCounter(ns+".exchanges.in_flight", metric.WithUnit("{exchange}"),
		metric.WithDescription("Exchanges received and not ended."))
	o.pending, errs[4] = m.Int64ObservableUpDownCounter(ns+".budget.pending", metric.WithUnit("{exchange}"),
		metric.WithDescription("Pending budget in use: exchanges admitted and not finished, and units taken ahead."))
	o.limit, errs[5] = m.Int64ObservableUpDownCounter(ns+".budget.limit", metric.WithUnit("{exchange}"),
		metric.WithDescription("Pending budget limit (dispatch.WithMaxPending)."))
	return errors.Join(errs[:]...)
}

// Admitted records nothing: an admitted exchange is counted when it ends.
func (o *Observer) Admitted(context.Context, dispatch.Labels) {}

// Started records the queue wait.
func (o *Observer) Started(ctx context.Context, l dispatch.Labels, queueWait time.Duration) {
	o.queueWait.Record(ctx, queueWait.Seconds(), o.sets.Get(l).wait...)
}

// Finished counts the exchange by outcome and records its handling time.
func (o *Observer) Finished(ctx context.Context, l dispatch.Labels, oc dispatch.Outcome, handling time.Duration, _ error) {
	count, took := o.sets.Get(l).outcome(l, oc)
	o.exchanges.Add(ctx, 1, count...)
	o.handling.Record(ctx, handling.Seconds(), took...)
}

// Discarded counts the exchange with outcome discarded.
func (o *Observer) Discarded(ctx context.Context, l dispatch.Labels, _ error) {
	count, _ := o.sets.Get(l).outcome(l, dispatch.OutcomeDiscarded)
	o.exchanges.Add(ctx, 1, count...)
}
