// Package data holds the flights the programs replay by default: the
// 20,000-flight sample, embedded in their binaries. The 3-million-flight
// Parquet file beside it is read from disk (-input); README.md gives the
// files' provenance.
package data

import (
	"embed"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// sampleFS holds vega-datasets' flights-20k.json, byte for byte, gzipped (1.8
// MB down to 220 kB): 20,000 US domestic flights of 2001 Q1, sorted by
// departure. The same file may be given to -input.
//
//go:embed flights-20k.json.gz
var sampleFS embed.FS

// SampleName labels the embedded sample in output.
const SampleName = "embedded flights-20k.json.gz"

// OpenSample opens the embedded sample; the caller closes it.
func OpenSample() (*flightdata.Input, error) {
	return flightdata.OpenFS(sampleFS, "flights-20k.json.gz")
}
