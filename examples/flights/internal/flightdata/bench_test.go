package flightdata_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// sampleJSON is the program's embedded sample, 20,000 real flights.
func sampleJSON(tb testing.TB) []byte {
	tb.Helper()
	f, err := os.Open("../../data/flights-20k.json.gz")
	require.NoError(tb, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(tb, err)
	data, err := io.ReadAll(zr)
	require.NoError(tb, err)
	return data
}

// BenchmarkDecode measures the decoders on the 20,000-flight sample, the
// Parquet one against parquet-go reading the same rows without converting
// them (the floor) and against the same decoder limited to one goroutine.
func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	js := sampleJSON(b)
	d, err := flightdata.DecodeJSON(ctx, bytes.NewReader(js), "sample.json", flightdata.Options{})
	require.NoError(b, err)
	pq := parquetBytes(b, flightsSchema, 2_000, datasetRows(d))

	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := flightdata.DecodeJSON(ctx, bytes.NewReader(js), "sample.json", flightdata.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		perRow(b, len(d.Flights))
	})
	parquetDecode := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := flightdata.DecodeParquet(ctx, bytes.NewReader(pq), int64(len(pq)), "sample.parquet", flightdata.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		perRow(b, len(d.Flights))
	}
	b.Run("parquet", parquetDecode)
	b.Run("parquet-1-goroutine", func(b *testing.B) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		parquetDecode(b)
	})
	b.Run("parquet-go-rows-only", func(b *testing.B) {
		b.ReportAllocs()
		rows := make([]parquet.Row, 1024)
		for b.Loop() {
			pf, err := parquet.OpenFile(bytes.NewReader(pq), int64(len(pq)))
			if err != nil {
				b.Fatal(err)
			}
			for _, rg := range pf.RowGroups() {
				r := rg.Rows()
				for err == nil {
					_, err = r.ReadRows(rows)
				}
				r.Close()
				if err != io.EOF {
					b.Fatal(err)
				}
				err = nil
			}
		}
		perRow(b, len(d.Flights))
	})
}

// perRow reports the time per row decoded, comparable across inputs.
func perRow(b *testing.B, rows int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}
