package job

import (
	"context"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/latency"
)

// AirportAggregate is the named aggregate of the replay: each origin airport
// is one aggregate, its IATA code the id.
var AirportAggregate = aggregate.MaterializedNamedAggregate{Context: "flights", Aggregate: "Airport"}

// DispatcherName names the dispatcher, in logs and in the metrics' labels.
const DispatcherName = "flights"

// Departure is the exchange: one flight, addressed to its origin airport.
type Departure struct {
	flightdata.Flight
	// OriginCode is the origin airport's IATA code: the aggregate's id.
	OriginCode string
}

// AggregateID builds the ID in place: aggregate.NewID would box the named
// aggregate into an interface, an allocation per exchange.
func (d Departure) AggregateID() aggregate.ID {
	return aggregate.ID{Named: AirportAggregate, ID: d.OriginCode, TenantID: aggregate.DefaultTenantID}
}

// StateSlot pads an airport's state to its own cache lines, so that two
// scheduler goroutines updating neighbouring airports do not contend.
type StateSlot struct {
	airport.State
	_ [64]byte
}

// Percentiles of a latency, in nanoseconds in JSON.
type Percentiles struct {
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
}

// Observer is a dispatch.Observer that records the dispatcher's queue
// waits and handling times; safe for concurrent use.
type Observer struct{ queueWait, handling latency.Histogram }

func (*Observer) Admitted(context.Context, dispatch.Labels) {}
func (o *Observer) Started(ctx context.Context, l dispatch.Labels, wait time.Duration) {
	o.queueWait.Record(wait)
}
func (o *Observer) Finished(ctx context.Context, l dispatch.Labels, _ dispatch.Outcome, handling time.Duration, _ error) {
	o.handling.Record(handling)
}
func (*Observer) Discarded(context.Context, dispatch.Labels, error) {}

// Percentiles returns the queue wait's and the handling's p50 and p99.
func (o *Observer) Percentiles() (queueWait, handling Percentiles) {
	q := func(h *latency.Histogram) Percentiles {
		return Percentiles{P50: h.Quantile(0.50), P99: h.Quantile(0.99)}
	}
	return q(&o.queueWait), q(&o.handling)
}
