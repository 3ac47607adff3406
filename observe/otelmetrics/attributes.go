package otelmetrics

import (
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// The attribute keys: all have a bounded number of values. The aggregate id and the group are never attributes.
const (
	DispatcherKey = attribute.Key("dispatcher")
	ContextKey    = attribute.Key("context")
	AggregateKey  = attribute.Key("aggregate")
	OutcomeKey    = attribute.Key("outcome")
)

// labelSet holds the measurement options of one Labels, built once: the
// attribute set without the outcome (queue wait) and one per outcome
// (exchanges, handling). The slices are passed as the variadic options
// as they are, so a measurement allocates nothing.
type labelSet struct {
	wait  []metric.RecordOption
	count [adapter.Outcomes][]metric.AddOption
	took  [adapter.Outcomes][]metric.RecordOption
}

func newLabelSet(l dispatch.Labels) *labelSet {
	base := baseAttributes(l)
	s := &labelSet{wait: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(base...))}}
	for o := range dispatch.Outcome(adapter.Outcomes) {
		opt := withOutcome(base, o)
		s.count[o] = []metric.AddOption{opt}
		s.took[o] = []metric.RecordOption{opt}
	}
	return s
}

func baseAttributes(l dispatch.Labels) []attribute.KeyValue {
	return []attribute.KeyValue{
		DispatcherKey.String(l.Dispatcher),
		ContextKey.String(l.Aggregate.Context),
		AggregateKey.String(l.Aggregate.Aggregate),
	}
}

// withOutcome returns the option of the attributes base and outcome o.
func withOutcome(base []attribute.KeyValue, o dispatch.Outcome) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(base), OutcomeKey.String(o.String()))...))
}

// outcome returns the options of outcome o: the cached ones, or for an
// outcome this version does not know, new ones (allocating).
func (s *labelSet) outcome(l dispatch.Labels, o dispatch.Outcome) ([]metric.AddOption, []metric.RecordOption) {
	if adapter.Known(o) {
		return s.count[o], s.took[o]
	}
	opt := withOutcome(baseAttributes(l), o)
	return []metric.AddOption{opt}, []metric.RecordOption{opt}
}
