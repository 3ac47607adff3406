package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/latency"
)

// airportAggregate is the named aggregate of the replay: each origin airport
// is one aggregate, its IATA code the id.
var airportAggregate = aggregate.MaterializedNamedAggregate{Context: "flights", Aggregate: "Airport"}

// dispatcherName names the dispatcher, in logs and in the metrics' labels.
const dispatcherName = "flights"

// departure is the exchange: one flight, addressed to its origin airport.
type departure struct {
	flightdata.Flight
	origin string
}

// AggregateID builds the ID in place: aggregate.NewID would box the named
// aggregate into an interface, an allocation per exchange.
func (d departure) AggregateID() aggregate.ID {
	return aggregate.ID{Named: airportAggregate, ID: d.origin, TenantID: aggregate.DefaultTenantID}
}

// dispatchBarWorth is the number of flights from which a dispatching
// progress bar is drawn under -progress auto.
const dispatchBarWorth = 100_000

// stateSlot pads an airport's state to its own cache lines, so that two
// scheduler goroutines updating neighbouring airports do not contend.
type stateSlot struct {
	airport.State
	_ [64]byte
}

// observer records the dispatcher's latencies.
type observer struct{ queueWait, handling latency.Histogram }

func (*observer) Admitted(context.Context, dispatch.Labels) {}
func (o *observer) Started(ctx context.Context, l dispatch.Labels, wait time.Duration) {
	o.queueWait.Record(wait)
}
func (o *observer) Finished(ctx context.Context, l dispatch.Labels, _ dispatch.Outcome, handling time.Duration, _ error) {
	o.handling.Record(handling)
}
func (*observer) Discarded(context.Context, dispatch.Labels, error) {}

// replayed is the outcome of a replay.
type replayed struct {
	counts  counts
	elapsed time.Duration
	signal  os.Signal // the first signal, which drained the dispatcher; nil if none came
	forced  bool      // a second one stopped it by force
	err     error
	latency *observer
	// readBack is what -source rxgo read back from the outcomes; nil for
	// -source flux.
	readBack *readBack
	// broker, queueWait and handling are -source jetstream's: the run
	// through the broker, and the consumer processes' latencies (latency
	// is nil then).
	broker              *brokerSummary
	queueWait, handling percentiles
	// replays counts the exchanges received again and skipped (at or below
	// their airport's last position): in counts, not flights lost.
	replays int64
}

// percentiles returns the queue wait's and the handling's.
func (r replayed) percentiles() (queueWait, handling percentiles) {
	if r.latency == nil {
		return r.queueWait, r.handling
	}
	q := func(h *latency.Histogram) percentiles {
		return percentiles{P50: h.Quantile(0.50), P99: h.Quantile(0.99)}
	}
	return q(&r.latency.queueWait), q(&r.latency.handling)
}

// replay dispatches every flight of data, in order, to the handler that
// folds it into states[origin], on a scheduler of cfg.pool goroutines and
// cfg.parallelism groups with a budget of cfg.maxPending, through the
// source cfg.source names; metrics, when not nil, observes the dispatcher
// and reports its gauges. Under -source rxgo the counts are the outcomes
// read back, and a disagreement with Stats is the run's error. A first value on
// e.interrupt drains the dispatcher gracefully, a second forces it to stop;
// the progress bar goes to e.stderr as cfg.progress says.
// It returns once every goroutine of the dispatcher and of its scheduler has
// exited, so states and the counts are final; the error is a lifecycle
// failure (the run did not happen).
func replay(cfg config, data *flightdata.Dataset, states []stateSlot, e env, metrics *metricsServer) (replayed, error) {
	supplier, err := aggregate.NewSchedulerSupplier("flights", aggregate.WithParallelism(cfg.pool))
	if err != nil {
		return replayed{}, err
	}
	handle := func(ctx context.Context, d departure) error {
		burn(ctx, cfg.handlerCost)
		states[d.Origin].Apply(d.Flight)
		if e.handled != nil {
			e.handled()
		}
		return nil
	}
	res := replayed{latency: &observer{}}
	opts := append([]dispatch.Option[departure]{
		dispatch.WithParallelism[departure](cfg.parallelism),
		dispatch.WithMaxPending[departure](cfg.maxPending),
		dispatch.WithSchedulerSupplier[departure](supplier),
		dispatch.WithObserver[departure](res.latency),
	}, metrics.options()...)
	var results *dispatch.Results[departure]
	if cfg.source == sourceRxgo {
		if results, err = dispatch.NewResults[departure](resultsBuffer); err != nil {
			return res, err
		}
		opts = append(opts, dispatch.WithResults(results))
	}
	d, err := dispatch.New(dispatcherName, airportAggregate, sourceOf(cfg.source, data), handle, opts...)
	if err == nil {
		err = metrics.register(d)
	}
	if err != nil {
		return res, err // nothing started yet
	}

	start := time.Now()
	if err = d.Prepare(context.Background()); err == nil {
		err = d.Start()
	}
	if err != nil {
		d.ForceStop()
		<-d.Done()
		stopSupplier(supplier, true)
		return res, err
	}
	stopProgress := startProgress(e.stderr, cfg.progress,
		bar{description: "dispatching", total: int64(len(data.Flights)), worth: dispatchBarWorth, unit: "exchanges"},
		func() int64 {
			s := d.Stats()
			return s.Succeeded + s.Failed + s.Discarded
		})
	var readAll func() readBack
	if results != nil {
		readAll = readOutcomes(results)
	}
	res.signal, res.forced = await(d, e.interrupt, repeatWithin)
	if readAll != nil {
		rb := readAll()
		res.readBack = &rb
	}
	res.elapsed = time.Since(start) // under rxgo, until the last outcome was read back
	stopProgress(res.signal == nil)
	stopSupplier(supplier, res.forced)

	s := d.Stats()
	res.counts = counts{Received: s.Received, Succeeded: s.Succeeded, Failed: s.Failed, Discarded: s.Discarded, InFlight: s.InFlight}
	res.err = d.Err()
	if rb := res.readBack; rb != nil {
		res.err = errors.Join(res.err, rb.reconcile(res.counts))
		if rb.dropped == 0 {
			res.counts = rb.counts // what the summary prints: the outcomes read back
		}
	}
	return res, nil
}

// stopSupplier stops the supplier, which owns the scheduler the dispatcher
// borrowed, and waits until the scheduler's goroutines exited: after that no
// handler runs any more, even one that a forced stop left running.
func stopSupplier(supplier *aggregate.Supplier, force bool) {
	if force {
		supplier.ForceStop()
	}
	_ = supplier.StopGracefully(context.Background())
}
