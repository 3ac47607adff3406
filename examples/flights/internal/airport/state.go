// Package airport folds an airport's departures, in the order they are seen,
// into a State whose every field depends on that order: handling one
// airport's flights out of order, twice or not at all changes the result.
// The flights program compares the state its dispatcher built with a
// sequential fold of the same input.
package airport

import (
	"fmt"
	"reflect"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// State is one airport's departures folded in arrival order. The zero value
// is the state before any departure. Apply must not be called concurrently
// on one State (the dispatcher serialises an airport's flights).
type State struct {
	// Departures counts the flights applied.
	Departures int64 `json:"departures"`
	// Violations counts departures scheduled before the previous one applied.
	Violations int64 `json:"violations"`
	// MeanDelay is the running mean of the delays in minutes, updated as
	// mean += (delay - mean) / n, so its rounding depends on the order.
	MeanDelay float64 `json:"mean_delay"`
	// MaxDelay is the largest delay in minutes (0 before any departure).
	MaxDelay int32 `json:"max_delay"`
	// OnTimeRun is the number of consecutive on-time (delay <= 0) departures
	// up to the last one applied; LongestOnTimeRun is its maximum.
	OnTimeRun        int64 `json:"on_time_run"`
	LongestOnTimeRun int64 `json:"longest_on_time_run"`
	// LastDeparture is the departure time of the last flight applied,
	// wall-clock microseconds as in flightdata.Flight.
	LastDeparture int64 `json:"last_departure_us"`
	// Sequence hashes every departure applied, in order (an xor-multiply
	// hash with FNV's constants over departure, delay and destination), so
	// that two states agree only if they saw the same flights in the same
	// order (up to a 2^-64 collision).
	Sequence uint64 `json:"sequence"`
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Apply folds one departure into s.
func (s *State) Apply(f flightdata.Flight) {
	if s.Departures > 0 && f.Departure < s.LastDeparture {
		s.Violations++
	}
	if s.Departures == 0 {
		s.MaxDelay, s.Sequence = f.Delay, fnvOffset
	}
	s.Departures++
	s.MeanDelay += (float64(f.Delay) - s.MeanDelay) / float64(s.Departures)
	s.MaxDelay = max(s.MaxDelay, f.Delay)
	if f.Delay <= 0 {
		s.OnTimeRun++
		s.LongestOnTimeRun = max(s.LongestOnTimeRun, s.OnTimeRun)
	} else {
		s.OnTimeRun = 0
	}
	s.LastDeparture = f.Departure
	for _, v := range [...]uint64{uint64(f.Departure), uint64(uint32(f.Delay)), uint64(f.Destination)} {
		s.Sequence = (s.Sequence ^ v) * fnvPrime
	}
}

// Fold applies every flight of d, in order, on the calling goroutine and
// returns the states indexed by origin airport (len(d.Airports) of them).
func Fold(d *flightdata.Dataset) []State {
	states := make([]State, len(d.Airports))
	for _, f := range d.Flights {
		states[f.Origin].Apply(f)
	}
	return states
}

// Diff returns a description of the first field that differs between
// want[i] and got(i), naming the airport by codes[i], or "" when all agree.
// got reads the states under comparison, wherever the caller keeps them.
func Diff(codes []string, want []State, got func(i int) State) string {
	for i := range want {
		w, g := reflect.ValueOf(want[i]), reflect.ValueOf(got(i))
		for f := range w.NumField() {
			if wf, gf := w.Field(f).Interface(), g.Field(f).Interface(); wf != gf {
				return fmt.Sprintf("airport %s: %s is %v, the sequential fold gives %v",
					codes[i], w.Type().Field(f).Name, gf, wf)
			}
		}
	}
	return ""
}
