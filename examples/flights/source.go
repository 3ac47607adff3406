package main

import (
	"context"
	"iter"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/flux"
)

// sourceKind is the -source flag: how the flights reach the dispatcher and
// how its outcomes are counted.
type sourceKind int

const (
	// sourceFlux: flux.FromSeq over the decoded flights; the outcomes are
	// the dispatcher's Stats.
	sourceFlux sourceKind = iota
	// sourceRxgo: a cold rxgo Observable made a source by
	// flux.FromObservable; the outcomes are read back as an rxgo
	// Observable (see readOutcomes) and checked against Stats.
	sourceRxgo
	// sourceJetstream is refused with a usage error that names
	// examples/flights/jetstream, where that run moved so that this
	// program builds no broker.
	sourceJetstream
)

var sourceKinds = []string{sourceFlux: "flux", sourceRxgo: "rxgo", sourceJetstream: "jetstream"}

// rxgoBuffer is the capacity of the channels rxgo hands items through, at
// both edges: with an unbuffered channel every item costs a goroutine
// switch between producer and reader.
const rxgoBuffer = 256

// departures yields every flight of data in file order, addressed to its
// origin airport.
func departures(data *flightdata.Dataset) iter.Seq[job.Departure] {
	return func(yield func(job.Departure) bool) {
		for _, f := range data.Flights {
			if !yield(job.Departure{Flight: f, OriginCode: data.Airports[f.Origin]}) {
				return
			}
		}
	}
}

// sourceOf returns the dispatcher's source of kind over data's flights.
func sourceOf(kind sourceKind, data *flightdata.Dataset) dispatch.Source[job.Departure] {
	if kind == sourceRxgo {
		return flux.FromObservable[job.Departure](observableOf(departures(data)))
	}
	return flux.FromSeq(departures(data))
}

// observableOf returns a cold Observable of seq's values: each Observe runs
// one producer that sends them in order and returns as soon as the context
// rxgo gives it ends. FromObservable cancels that context when its
// subscription ends, a stop of the dispatcher included, so an early stop
// leaves no producer behind. Each value is boxed into an rxgo.Item: an
// allocation per value.
func observableOf[T any](seq iter.Seq[T]) rxgo.Observable {
	return rxgo.Defer([]rxgo.Producer{func(ctx context.Context, next chan<- rxgo.Item) {
		for v := range seq {
			if !rxgo.Of(v).SendContext(ctx, next) {
				return
			}
		}
	}}, rxgo.WithBufferedChannel(rxgoBuffer))
}
