package main

import (
	"encoding/binary"
	"fmt"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// departure is the exchange: one flight, addressed to its origin airport,
// whose IATA code is the record's key.
type departure struct {
	flightdata.Flight
	origin string
}

// recordSize is a flight's value on the topic: departure, delay, distance,
// origin and destination indexes, big-endian.
const recordSize = 8 + 4 + 4 + 2 + 2

func encode(f flightdata.Flight) []byte {
	b := make([]byte, recordSize)
	binary.BigEndian.PutUint64(b[0:], uint64(f.Departure))
	binary.BigEndian.PutUint32(b[8:], uint32(f.Delay))
	binary.BigEndian.PutUint32(b[12:], uint32(f.Distance))
	binary.BigEndian.PutUint16(b[16:], uint16(f.Origin))
	binary.BigEndian.PutUint16(b[18:], uint16(f.Destination))
	return b
}

func decode(key, value []byte) (departure, error) {
	if len(value) != recordSize {
		return departure{}, fmt.Errorf("flights-kafka: a flight is %d bytes, got %d", recordSize, len(value))
	}
	return departure{origin: string(key), Flight: flightdata.Flight{
		Departure:   int64(binary.BigEndian.Uint64(value[0:])),
		Delay:       int32(binary.BigEndian.Uint32(value[8:])),
		Distance:    int32(binary.BigEndian.Uint32(value[12:])),
		Origin:      flightdata.Airport(binary.BigEndian.Uint16(value[16:])),
		Destination: flightdata.Airport(binary.BigEndian.Uint16(value[18:])),
	}}, nil
}
