package scenario

import (
	"sort"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Key is one label set: Outcome is "" for the queue wait, which has none.
type Key struct {
	Dispatcher, Context, Aggregate, Outcome string
}

// KeyOf returns the label set of l and outcome.
func KeyOf(l dispatch.Labels, outcome string) Key {
	return Key{l.Dispatcher, l.Aggregate.Context, l.Aggregate.Aggregate, outcome}
}

// Want is what the metrics must show.
type Want struct {
	Exchanges map[Key]int64     // exchanges ended, by label set with outcome
	Handling  map[Key][]float64 // handling times in seconds, by label set with outcome
	QueueWait map[Key]int       // handlers started, by label set without outcome
	// Gauges by dispatcher name, as they are once the run is over.
	Gauges map[string]adapter.Gauges
	// IDs are every aggregate id of the run: none may be a label value.
	IDs []string
}

func newWant() Want {
	return Want{Exchanges: map[Key]int64{}, Handling: map[Key][]float64{},
		QueueWait: map[Key]int{}, Gauges: map[string]adapter.Gauges{}}
}

// handled adds one handled exchange.
func (w *Want) handled(l dispatch.Labels, o dispatch.Outcome, seconds float64) {
	k := KeyOf(l, o.String())
	w.Exchanges[k]++
	w.Handling[k] = append(w.Handling[k], seconds)
}

// started adds one handler start.
func (w *Want) started(l dispatch.Labels) { w.QueueWait[KeyOf(l, "")]++ }

// discarded adds one discarded exchange.
func (w *Want) discarded(l dispatch.Labels) {
	w.Exchanges[KeyOf(l, dispatch.OutcomeDiscarded.String())]++
}

// Histogram is a histogram's content: Counts[i] is the number of values in
// (bounds[i-1], bounds[i]], the last one those above every bound (not
// cumulative).
type Histogram struct {
	Count  uint64
	Sum    float64
	Counts []uint64
}

// Summarise returns the histogram of values over bounds: the model of an
// explicit-bucket histogram, whose buckets include their upper bound.
func Summarise(values, bounds []float64) Histogram {
	h := Histogram{Counts: make([]uint64, len(bounds)+1)}
	for _, v := range values {
		h.Count++
		h.Sum += v
		h.Counts[sort.SearchFloat64s(bounds, v)]++
	}
	return h
}

// Got is what an adapter's metrics showed, in the model's terms.
type Got struct {
	Exchanges map[Key]int64
	Handling  map[Key]Histogram
	QueueWait map[Key]uint64 // observation counts
	Gauges    map[string]adapter.Gauges
	// Labels is every label key and value seen, for the cardinality checks.
	Labels map[string][]string
}

// NewGot returns an empty Got.
func NewGot() Got {
	return Got{Exchanges: map[Key]int64{}, Handling: map[Key]Histogram{}, QueueWait: map[Key]uint64{},
		Gauges: map[string]adapter.Gauges{}, Labels: map[string][]string{}}
}

// Label records a label seen.
func (g *Got) Label(key, value string) { g.Labels[key] = append(g.Labels[key], value) }

// Merge returns the sum of wants: what the metrics show after the runs of
// all of them (IDs and Gauges are not merged).
func Merge(wants ...Want) Want {
	sum := newWant()
	for _, w := range wants {
		for k, n := range w.Exchanges {
			sum.Exchanges[k] += n
		}
		for k, vs := range w.Handling {
			sum.Handling[k] = append(sum.Handling[k], vs...)
		}
		for k, n := range w.QueueWait {
			sum.QueueWait[k] += n
		}
	}
	return sum
}

// Gauge records the value of a gauge of dispatcher: name is the metric's
// name after the namespace, with "." or "_" between words
// ("exchanges_in_flight", "budget.pending", ...).
func (g *Got) Gauge(t require.TestingT, dispatcher, name string, v int64) {
	gs := g.Gauges[dispatcher]
	switch strings.ReplaceAll(name, ".", "_") {
	case "exchanges_in_flight":
		gs.InFlight = v
	case "budget_pending":
		gs.Pending = v
	case "budget_limit":
		gs.Limit = v
	default:
		require.Fail(t, "not a gauge", name)
	}
	g.Gauges[dispatcher] = gs
}
