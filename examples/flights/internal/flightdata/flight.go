package flightdata

import (
	"fmt"
	"math"
)

// Airport indexes Dataset.Airports: airport codes are stored once per
// dataset, flights carry 2-byte indexes.
type Airport uint16

// Flight is one departure, 24 bytes.
type Flight struct {
	// Departure is the scheduled departure, wall-clock microseconds since
	// 1970/01/01 00:00 with no time zone (local time at the origin).
	Departure int64
	// Delay is the departure delay in minutes; negative means early.
	Delay int32
	// Distance is the flight's length in miles.
	Distance int32
	// Origin and Destination index Dataset.Airports.
	Origin, Destination Airport
}

// Dataset is a decoded file: its flights in file order and the airport codes
// they index, in order of first appearance.
type Dataset struct {
	Flights  []Flight
	Airports []string
}

// Code returns the IATA code of a.
func (d *Dataset) Code(a Airport) string { return d.Airports[a] }

// Origins counts the airports that at least one flight departs from; the
// others of Airports are only destinations. It reads every flight.
func (d *Dataset) Origins() int {
	seen := make([]bool, len(d.Airports))
	n := 0
	for _, f := range d.Flights {
		if !seen[f.Origin] {
			seen[f.Origin] = true
			n++
		}
	}
	return n
}

// builder accumulates flights and interns airport codes.
type builder struct {
	Dataset
	index map[string]Airport
}

func newBuilder(rows int) *builder {
	return &builder{
		Dataset: Dataset{Flights: make([]Flight, 0, rows)},
		index:   make(map[string]Airport),
	}
}

// airport returns the index of code, adding it on first sight. The lookup
// with string(code) does not allocate; only a new code is copied.
func (b *builder) airport(code []byte, field string) (Airport, error) {
	if a, ok := b.index[string(code)]; ok {
		return a, nil
	}
	if len(code) == 0 {
		return 0, fmt.Errorf("%w: %s is empty", ErrBadAirport, field)
	}
	if len(b.Airports) > math.MaxUint16 {
		return 0, ErrTooManyAirports
	}
	a := Airport(len(b.Airports))
	s := string(code)
	b.Airports = append(b.Airports, s)
	b.index[s] = a
	return a, nil
}

// add appends one flight from its decoded fields.
func (b *builder) add(departure, delay, distance int64, origin, destination []byte) error {
	if delay < math.MinInt32 || delay > math.MaxInt32 {
		return fmt.Errorf("%w: delay %d", ErrOutOfRange, delay)
	}
	if distance < math.MinInt32 || distance > math.MaxInt32 {
		return fmt.Errorf("%w: distance %d", ErrOutOfRange, distance)
	}
	o, err := b.airport(origin, "origin")
	if err != nil {
		return err
	}
	d, err := b.airport(destination, "destination")
	if err != nil {
		return err
	}
	b.Flights = append(b.Flights, Flight{
		Departure: departure, Delay: int32(delay), Distance: int32(distance),
		Origin: o, Destination: d,
	})
	return nil
}
