package main

import (
	"errors"
	"testing"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// A flight survives its encoding for the stream, but for its origin, which
// travels as the key; anything but an encoding's length is refused.
func FuzzFlightEncoding(f *testing.F) {
	f.Add(int64(986_000_000_000_000), int32(-5), int32(1200), uint16(3), []byte("short"))
	f.Fuzz(func(t *testing.T, departure int64, delay, distance int32, destination uint16, junk []byte) {
		in := flightdata.Flight{Departure: departure, Delay: delay, Distance: distance, Destination: flightdata.Airport(destination), Origin: 7}
		d, err := decodeDeparture("ORD", encodeFlight(in))
		if err != nil {
			t.Fatal(err)
		}
		in.Origin = 0
		if d.Flight != in || d.origin != "ORD" {
			t.Fatalf("decoded %+v from %+v", d, in)
		}
		if _, err := decodeDeparture("ORD", junk); len(junk) != flightSize && !errors.Is(err, errFlightEncoding) {
			t.Fatalf("%d bytes decoded: %v", len(junk), err)
		}
	})
}
