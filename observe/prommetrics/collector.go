package prommetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// The label names: all have a bounded number of values. The aggregate id and the group are never labels.
const (
	DispatcherLabel = "dispatcher"
	ContextLabel    = "context"
	AggregateLabel  = "aggregate"
	OutcomeLabel    = "outcome"
)

// Collector is a dispatch.Observer and a prometheus.Collector: it counts a
// dispatcher's exchanges and records their times as it observes them, and
// reads the gauges of the dispatchers given to Register when it is
// collected. "<ns>" is the namespace (default "aggflow"):
//
//	<ns>_exchanges_total                counter: exchanges ended,
//	                                    by dispatcher, context, aggregate, outcome
//	<ns>_exchange_queue_wait_seconds    histogram: admission to handler start,
//	                                    by dispatcher, context, aggregate
//	<ns>_exchange_handling_seconds      histogram: the handler's running time,
//	                                    by dispatcher, context, aggregate, outcome
//	<ns>_exchanges_in_flight            gauge: Stats().InFlight, by dispatcher
//	<ns>_budget_pending                 gauge: Budget()'s pending, by dispatcher
//	<ns>_budget_limit                   gauge: Budget()'s limit, by dispatcher
//
// Outcomes are dispatch.Outcome's String values: success, error, panic,
// cancelled (Finished) and discarded (Discarded). Every exchange a
// dispatcher received is counted once in <ns>_exchanges_total; the handling
// histogram has one value per handled exchange (0 s for one refused before
// a handler, with outcome error), the queue wait one per handler started.
// A series appears on its first event. The Labels of a MainDispatcher's
// exchanges name its child ("<main>-<aggregate>") while its gauges name the
// MainDispatcher itself.
//
// Register the Collector with a prometheus.Registerer and give it to
// dispatchers with dispatch.WithObserver (one Collector may serve many
// dispatchers). Its Observer methods run inline on the dispatchers'
// goroutines, concurrently: each takes one lock-free lookup of the Labels'
// child metrics (made on the first event of each Labels and outcome) and
// one or two atomic updates, and allocates nothing once they were made.
type Collector struct {
	exchanges *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
	handling  *prometheus.HistogramVec
	inFlight  *prometheus.Desc
	pending   *prometheus.Desc
	limit     *prometheus.Desc
	children  *adapter.Cache[*children]
	gauged    adapter.Registry[Dispatcher]
}

var (
	_ dispatch.Observer    = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// New returns a Collector, not registered anywhere. An invalid option
// returns ErrInvalidOption.
func New(opts ...Option) (*Collector, error) {
	cfg := adapter.NewConfig(DefaultNamespace, opts)
	if err := cfg.Err(ErrInvalidOption); err != nil {
		return nil, err
	}
	ns := cfg.Namespace
	outcome := []string{DispatcherLabel, ContextLabel, AggregateLabel, OutcomeLabel}
	byDispatcher := []string{DispatcherLabel}
	return &Collector{
		exchanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "exchanges_total",
			Help: "Exchanges ended, by outcome."}, outcome),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "exchange_queue_wait_seconds",
			Help: "Time an exchange waited from admission to its handler's start.", Buckets: cfg.QueueWait}, outcome[:3]),
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "exchange_handling_seconds",
			Help: "Running time of the handler, by outcome.", Buckets: cfg.Handling}, outcome),
		inFlight: prometheus.NewDesc(ns+"_exchanges_in_flight", "Exchanges received and not ended.", byDispatcher, nil),
		pending: prometheus.NewDesc(ns+"_budget_pending",
			"Pending budget in use: exchanges admitted and not finished, and units taken ahead.", byDispatcher, nil),
		limit:    prometheus.NewDesc(ns+"_budget_limit", "Pending budget limit (dispatch.WithMaxPending).", byDispatcher, nil),
		children: adapter.NewCache(newChildren),
	}, nil
}

// Admitted records nothing: an admitted exchange is counted when it ends.
func (c *Collector) Admitted(context.Context, dispatch.Labels) {}

// Started records the queue wait.
func (c *Collector) Started(_ context.Context, l dispatch.Labels, queueWait time.Duration) {
	ch := c.children.Get(l)
	child(&ch.wait, c.queueWait, (*prometheus.HistogramVec).WithLabelValues, ch.base).Observe(queueWait.Seconds())
}

// Finished counts the exchange by outcome and records its handling time.
func (c *Collector) Finished(_ context.Context, l dispatch.Labels, o dispatch.Outcome, handling time.Duration, _ error) {
	ch := c.children.Get(l)
	if !adapter.Known(o) { // not cached: allocates
		values := withOutcome(ch.base, o)
		c.exchanges.WithLabelValues(values...).Inc()
		c.handling.WithLabelValues(values...).Observe(handling.Seconds())
		return
	}
	child(&ch.counts[o], c.exchanges, (*prometheus.CounterVec).WithLabelValues, ch.values[o]).Inc()
	child(&ch.handling[o], c.handling, (*prometheus.HistogramVec).WithLabelValues, ch.values[o]).Observe(handling.Seconds())
}

// Discarded counts the exchange with outcome discarded.
func (c *Collector) Discarded(_ context.Context, l dispatch.Labels, _ error) {
	ch := c.children.Get(l)
	o := dispatch.OutcomeDiscarded
	child(&ch.counts[o], c.exchanges, (*prometheus.CounterVec).WithLabelValues, ch.values[o]).Inc()
}

// Describe sends the descriptors of every metric: the Collector is checked
// (not unchecked), so a registry refuses a second Collector of the same
// namespace.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.exchanges.Describe(ch)
	c.queueWait.Describe(ch)
	c.handling.Describe(ch)
	ch <- c.inFlight
	ch <- c.pending
	ch <- c.limit
}

// Collect sends the counters and histograms, and the gauges of every
// registered dispatcher, read now (atomic loads). A dispatcher whose
// methods panic is sent as an invalid metric wrapping a *PanicError, which
// fails the registry's Gather with that error; the others are still sent.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.exchanges.Collect(ch)
	c.queueWait.Collect(ch)
	c.handling.Collect(ch)
	for _, e := range c.gauged.All() {
		g, err := adapter.Read(e.Value)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.inFlight, fmt.Errorf("prommetrics: reading dispatcher %q: %w", e.Name, err))
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(g.InFlight), e.Name)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.Pending), e.Name)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(g.Limit), e.Name)
	}
}
