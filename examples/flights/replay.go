package main

import (
	"context"
	"errors"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// dispatchBarWorth is the number of flights from which a dispatching
// progress bar is drawn under -progress auto.
const dispatchBarWorth = 100_000

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
func replay(cfg config, data *flightdata.Dataset, states []job.StateSlot, e env, metrics *metricsServer) (job.Replayed, error) {
	supplier, err := aggregate.NewSchedulerSupplier("flights", aggregate.WithParallelism(cfg.Pool))
	if err != nil {
		return job.Replayed{}, err
	}
	handle := func(ctx context.Context, d job.Departure) error {
		job.Burn(ctx, cfg.HandlerCost)
		states[d.Origin].Apply(d.Flight)
		if e.handled != nil {
			e.handled()
		}
		return nil
	}
	res := job.Replayed{Source: sourceKinds[cfg.source]}
	latency := &job.Observer{}
	opts := append([]dispatch.Option[job.Departure]{
		dispatch.WithParallelism(cfg.Parallelism),
		dispatch.WithMaxPending(cfg.MaxPending),
		dispatch.WithSchedulerSupplier(supplier),
		dispatch.WithObserver(latency),
	}, metrics.options()...)
	var results *dispatch.Results[job.Departure]
	if cfg.source == sourceRxgo {
		if results, err = dispatch.NewResults[job.Departure](resultsBuffer); err != nil {
			return res, err
		}
		opts = append(opts, dispatch.WithResults(results))
	}
	d, err := dispatch.New(job.DispatcherName, job.AirportAggregate, sourceOf(cfg.source, data), handle, opts...)
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
	stopProgress := job.StartProgress(e.Stderr, cfg.Progress,
		job.Bar{Description: "dispatching", Total: int64(len(data.Flights)), Worth: dispatchBarWorth, Unit: "exchanges"},
		func() int64 {
			s := d.Stats()
			return s.Succeeded + s.Failed + s.Discarded
		})
	var readAll func() readBack
	if results != nil {
		readAll = readOutcomes(results)
	}
	res.Signal, res.Forced = await(d, e.Interrupt, job.RepeatWithin)
	var rb *readBack
	if readAll != nil {
		all := readAll()
		rb = &all
	}
	res.Elapsed = time.Since(start) // under rxgo, until the last outcome was read back
	stopProgress(res.Signal == nil)
	stopSupplier(supplier, res.Forced)

	s := d.Stats()
	res.Counts = job.Counts{Received: s.Received, Succeeded: s.Succeeded, Failed: s.Failed, Discarded: s.Discarded, InFlight: s.InFlight}
	res.Err = d.Err()
	res.QueueWait, res.Handling = latency.Percentiles()
	res.SourceLine = sourceLine(res.Source, nil)
	if rb != nil {
		res.Err = errors.Join(res.Err, rb.reconcile(res.Counts))
		summary := rb.summary(res.Err)
		res.ReadBack, res.SourceLine = summary, sourceLine(res.Source, summary)
		if rb.dropped == 0 {
			res.Counts = rb.counts // what the summary prints: the outcomes read back
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
