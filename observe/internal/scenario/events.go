package scenario

import (
	"context"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"

	"github.com/aggflow/aggflow/dispatch"
)

// Kind is which Observer method an Event calls.
type Kind int

const (
	Admitted Kind = iota
	Started
	Finished
	Discarded
)

// Event is one call of an Observer method.
type Event struct {
	Kind    Kind
	Labels  dispatch.Labels
	Outcome dispatch.Outcome // for Finished
	Took    time.Duration    // the queue wait (Started) or the handling (Finished)
}

// labelChoices are few, so that label sets repeat: the zero aggregate is a
// MainDispatcher's refusals.
var labelChoices = []dispatch.Labels{
	{Dispatcher: "a", Aggregate: Orders},
	{Dispatcher: "a", Aggregate: Invoices},
	{Dispatcher: "b", Aggregate: Orders},
	{Dispatcher: "b"},
}

// Events generates sequences of Observer events; durations are now and
// then exactly a bound of bounds (seconds), where bucket edges are decided.
func Events(bounds []float64) *rapid.Generator[[]Event] {
	duration := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "ns"))
		}),
		rapid.Custom(func(t *rapid.T) time.Duration {
			b := rapid.SampledFrom(bounds).Draw(t, "bound")
			return time.Duration(b * float64(time.Second))
		}),
	)
	event := rapid.Custom(func(t *rapid.T) Event {
		return Event{
			Kind:    Kind(rapid.IntRange(int(Admitted), int(Discarded)).Draw(t, "kind")),
			Labels:  rapid.SampledFrom(labelChoices).Draw(t, "labels"),
			Outcome: dispatch.Outcome(rapid.IntRange(int(dispatch.OutcomeSuccess), int(dispatch.OutcomeCancelled)).Draw(t, "outcome")),
			Took:    duration.Draw(t, "took"),
		}
	})
	return rapid.SliceOfN(event, 0, 200)
}

// Apply calls obs with each event, in order, and returns what the metrics
// must show. The queue waits' values are not modelled, only their count.
func Apply(obs dispatch.Observer, events []Event) Want {
	want := newWant()
	ctx := context.Background()
	for _, e := range events {
		switch e.Kind {
		case Admitted:
			obs.Admitted(ctx, e.Labels)
		case Started:
			obs.Started(ctx, e.Labels, e.Took)
			want.started(e.Labels)
		case Finished:
			obs.Finished(ctx, e.Labels, e.Outcome, e.Took, nil)
			want.handled(e.Labels, e.Outcome, e.Took.Seconds())
		case Discarded:
			obs.Discarded(ctx, e.Labels, nil)
			want.discarded(e.Labels)
		}
	}
	return want
}

// AllEvents returns a fixed sequence with every kind of event for every
// label choice and every outcome, with durations below, on and above the
// default bounds.
func AllEvents() []Event {
	took := []time.Duration{0, 10 * time.Microsecond, 3 * time.Millisecond, time.Second, time.Minute}
	var events []Event
	for _, l := range labelChoices {
		for i, d := range took {
			events = append(events, Event{Kind: Admitted, Labels: l}, Event{Kind: Started, Labels: l, Took: d})
			for o := dispatch.OutcomeSuccess; o <= dispatch.OutcomeCancelled; o++ {
				events = append(events, Event{Kind: Finished, Labels: l, Outcome: o, Took: took[(i+int(o))%len(took)]})
			}
			events = append(events, Event{Kind: Discarded, Labels: l})
		}
	}
	return events
}

// Bounds generates valid histogram bounds: 1 to 30 distinct increasing
// values in seconds.
func Bounds() *rapid.Generator[[]float64] {
	return rapid.Custom(func(t *rapid.T) []float64 {
		bs := rapid.SliceOfNDistinct(rapid.Float64Range(1e-6, 100), 1, 30, rapid.ID).Draw(t, "bounds")
		slices.Sort(bs)
		return bs
	})
}

// BadLabels are Labels whose strings are not valid UTF-8.
var BadLabels = dispatch.Labels{Dispatcher: "d\xff", Aggregate: aggregate.MaterializedNamedAggregate{Context: "c\xfe", Aggregate: "a\xc0"}}
