package main

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"fmt"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// sampleGz is vega-datasets' flights-20k.json, byte for byte, gzipped (1.8 MB
// down to 220 kB): 20,000 US domestic flights of 2001 Q1, sorted by departure.
//
//go:embed data/flights-20k.json.gz
var sampleGz []byte

// sampleName labels the embedded sample in output and errors.
const sampleName = "embedded flights-20k.json"

// loadSample decodes the embedded sample.
func loadSample(ctx context.Context) (*flightdata.Dataset, error) {
	zr, err := gzip.NewReader(bytes.NewReader(sampleGz))
	if err != nil {
		return nil, fmt.Errorf("flights: %s: %w", sampleName, err)
	}
	return flightdata.DecodeJSON(ctx, zr, sampleName)
}
