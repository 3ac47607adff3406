package airport_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func TestApply(t *testing.T) {
	var s airport.State
	for _, f := range []flightdata.Flight{
		{Departure: 100, Delay: 10},
		{Departure: 200, Delay: -5},
		{Departure: 200, Delay: 0},
		{Departure: 150, Delay: -1}, // earlier than the previous: a violation
		{Departure: 300, Delay: 30},
		{Departure: 400, Delay: 0},
	} {
		s.Apply(f)
	}
	assert.Equal(t, int64(6), s.Departures)
	assert.Equal(t, int64(1), s.Violations)
	assert.InDelta(t, 34.0/6, s.MeanDelay, 1e-12)
	assert.Equal(t, int32(30), s.MaxDelay)
	assert.Equal(t, int64(3), s.LongestOnTimeRun)
	assert.Equal(t, int64(1), s.OnTimeRun)
	assert.Equal(t, int64(400), s.LastDeparture)
}

func TestApplyNegativeMax(t *testing.T) {
	var s airport.State
	s.Apply(flightdata.Flight{Delay: -7})
	s.Apply(flightdata.Flight{Delay: -3})
	assert.Equal(t, int32(-3), s.MaxDelay, "an all-early airport keeps a negative maximum")
}

func genDataset(t *rapid.T, airports int) *flightdata.Dataset {
	d := &flightdata.Dataset{}
	for i := range airports {
		d.Airports = append(d.Airports, string(rune('A'+i)))
	}
	d.Flights = rapid.SliceOf(rapid.Custom(func(t *rapid.T) flightdata.Flight {
		return flightdata.Flight{
			Departure:   rapid.Int64Range(0, 1000).Draw(t, "departure"),
			Delay:       rapid.Int32Range(-30, 30).Draw(t, "delay"),
			Origin:      flightdata.Airport(rapid.IntRange(0, airports-1).Draw(t, "origin")),
			Destination: flightdata.Airport(rapid.IntRange(0, airports-1).Draw(t, "destination")),
		}
	})).Draw(t, "flights")
	return d
}

// TestFoldIgnoresInterleaving: any interleaving of the airports that keeps
// each airport's own order folds to the same states — the freedom a
// dispatcher has.
func TestFoldIgnoresInterleaving(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDataset(t, rapid.IntRange(1, 5).Draw(t, "airports"))
		perAirport := make([][]flightdata.Flight, len(d.Airports))
		for _, f := range d.Flights {
			perAirport[f.Origin] = append(perAirport[f.Origin], f)
		}
		mixed := &flightdata.Dataset{Airports: d.Airports}
		for len(mixed.Flights) < len(d.Flights) {
			a := rapid.IntRange(0, len(d.Airports)-1).Draw(t, "next airport")
			if len(perAirport[a]) > 0 {
				mixed.Flights = append(mixed.Flights, perAirport[a][0])
				perAirport[a] = perAirport[a][1:]
			}
		}
		want := airport.Fold(d)
		got := airport.Fold(mixed)
		assert.Empty(t, airport.Diff(d.Airports, want, func(i int) airport.State { return got[i] }))
	})
}

// TestFoldSeesOrder: swapping two different flights of one airport, losing
// one or handling one twice changes that airport's state.
func TestFoldSeesOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDataset(t, 1)
		if len(d.Flights) < 2 {
			t.Skip("too short")
		}
		i := rapid.IntRange(0, len(d.Flights)-2).Draw(t, "i")
		j := rapid.IntRange(i+1, len(d.Flights)-1).Draw(t, "j")
		want := airport.Fold(d)[0]

		lost := &flightdata.Dataset{Airports: d.Airports, Flights: slices.Delete(slices.Clone(d.Flights), i, i+1)}
		assert.NotEqual(t, want, airport.Fold(lost)[0], "lost flight %d", i)

		twice := &flightdata.Dataset{Airports: d.Airports, Flights: slices.Insert(slices.Clone(d.Flights), i, d.Flights[i])}
		assert.NotEqual(t, want, airport.Fold(twice)[0], "flight %d handled twice", i)

		if d.Flights[i] != d.Flights[j] {
			swapped := &flightdata.Dataset{Airports: d.Airports, Flights: slices.Clone(d.Flights)}
			swapped.Flights[i], swapped.Flights[j] = swapped.Flights[j], swapped.Flights[i]
			assert.NotEqual(t, want, airport.Fold(swapped)[0], "flights %d and %d swapped", i, j)
		}
	})
}

func TestDiff(t *testing.T) {
	codes := []string{"ATL", "BOS"}
	want := []airport.State{{Departures: 2, MeanDelay: 1.5}, {Departures: 1, LongestOnTimeRun: 1}}
	got := slices.Clone(want)
	read := func(i int) airport.State { return got[i] }
	assert.Empty(t, airport.Diff(codes, want, read))

	got[1].LongestOnTimeRun = 0
	assert.Equal(t, "airport BOS: LongestOnTimeRun is 0, the sequential fold gives 1", airport.Diff(codes, want, read))

	got[0].MeanDelay = 1.5000000000000002
	assert.Equal(t, "airport ATL: MeanDelay is 1.5000000000000002, the sequential fold gives 1.5", airport.Diff(codes, want, read))
}
