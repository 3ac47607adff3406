package main

import (
	"embed"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// sampleFS holds vega-datasets' flights-20k.json, byte for byte, gzipped (1.8
// MB down to 220 kB): 20,000 US domestic flights of 2001 Q1, sorted by
// departure. The same file may be given to -input.
//
//go:embed data/flights-20k.json.gz
var sampleFS embed.FS

const (
	samplePath = "data/flights-20k.json.gz"
	// sampleName labels the embedded sample in output.
	sampleName = "embedded flights-20k.json.gz"
)

// openInput opens the input named by cfg, or the embedded sample.
func openInput(cfg config) (*flightdata.Input, error) {
	if cfg.input == "" {
		return flightdata.OpenFS(sampleFS, samplePath)
	}
	return flightdata.Open(cfg.input)
}
