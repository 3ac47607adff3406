package flightdata_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

const threeFlights = `[
{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
{"date":"2001/01/01 01:10","delay":-5,"distance":2399,"origin":"LAS","destination":"DTW"},
{"date":"2001/01/01 01:24","delay":0,"distance":407,"origin":"DTW","destination":"OAK"}
]`

func minute(t *testing.T, s string) int64 {
	t.Helper()
	m, err := flightdata.ParseDate(s)
	require.NoError(t, err)
	return m
}

// wantThree is threeFlights decoded.
func wantThree(t *testing.T) *flightdata.Dataset {
	return &flightdata.Dataset{
		Airports: []string{"DTW", "LAS", "OAK"},
		Flights: []flightdata.Flight{
			{Departure: minute(t, "2001/01/01 00:47"), Delay: 66, Distance: 1750, Origin: 0, Destination: 1},
			{Departure: minute(t, "2001/01/01 01:10"), Delay: -5, Distance: 2399, Origin: 1, Destination: 0},
			{Departure: minute(t, "2001/01/01 01:24"), Delay: 0, Distance: 407, Origin: 0, Destination: 2},
		},
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// decodeFile opens path and decodes it with the default options.
func decodeFile(ctx context.Context, path string) (*flightdata.Dataset, error) {
	in, err := flightdata.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return in.Decode(ctx, flightdata.Options{})
}

func TestOpenJSON(t *testing.T) {
	path := writeFile(t, "three.json", []byte(threeFlights))
	got, err := decodeFile(context.Background(), path)
	require.NoError(t, err)
	assert.Equal(t, wantThree(t), got)
	assert.Equal(t, "LAS", got.Code(got.Flights[1].Origin))
}

// flightsSchema is the schema of the 3M-row file; parquet.Group orders its
// columns by name, so the column indexes differ from the JSON field order.
var flightsSchema = parquet.NewSchema("flights", parquet.Group{
	"date":        parquet.Optional(parquet.TimestampAdjusted(parquet.Microsecond, false)),
	"delay":       parquet.Optional(parquet.Int(64)),
	"distance":    parquet.Optional(parquet.Int(64)),
	"origin":      parquet.Optional(parquet.String()),
	"destination": parquet.Optional(parquet.String()),
})

// flightRow builds a row of flightsSchema: columns date, delay, destination,
// distance, origin.
func flightRow(date, delay, distance int64, origin, destination string) parquet.Row {
	return parquet.Row{
		parquet.Int64Value(date).Level(0, 1, 0),
		parquet.Int64Value(delay).Level(0, 1, 1),
		parquet.ByteArrayValue([]byte(destination)).Level(0, 1, 2),
		parquet.Int64Value(distance).Level(0, 1, 3),
		parquet.ByteArrayValue([]byte(origin)).Level(0, 1, 4),
	}
}

// parquetBytes encodes rows with schema, starting a new row group every
// perGroup rows.
func parquetBytes(tb testing.TB, schema *parquet.Schema, perGroup int, rows []parquet.Row) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, schema)
	for len(rows) > 0 {
		n := min(perGroup, len(rows))
		_, err := w.WriteRows(rows[:n])
		require.NoError(tb, err)
		require.NoError(tb, w.Flush())
		rows = rows[n:]
	}
	require.NoError(tb, w.Close())
	return buf.Bytes()
}

func writeParquet(t *testing.T, schema *parquet.Schema, perGroup int, rows []parquet.Row) string {
	t.Helper()
	return writeFile(t, "flights.parquet", parquetBytes(t, schema, perGroup, rows))
}

// datasetRows turns a dataset back into rows of flightsSchema.
func datasetRows(d *flightdata.Dataset) []parquet.Row {
	rows := make([]parquet.Row, len(d.Flights))
	for i, f := range d.Flights {
		rows[i] = flightRow(f.Departure, int64(f.Delay), int64(f.Distance), d.Code(f.Origin), d.Code(f.Destination))
	}
	return rows
}

func threeRows(t *testing.T) []parquet.Row { return datasetRows(wantThree(t)) }

func TestOpenParquet(t *testing.T) {
	for _, perGroup := range []int{1, 2, 3} {
		path := writeParquet(t, flightsSchema, perGroup, threeRows(t))
		got, err := decodeFile(context.Background(), path)
		require.NoError(t, err)
		assert.Equal(t, wantThree(t), got, "%d rows per row group", perGroup)
	}
}

// TestOpenParquetManyGroups decodes more row groups than goroutines, with
// airports first seen in different groups, and compares with the same rows
// in JSON: the airport table follows the order of first appearance in the
// file whatever the decoding order.
func TestOpenParquetManyGroups(t *testing.T) {
	codes := []string{"ATL", "BOS", "CLT", "DEN", "EWR", "FLL", "GEG"}
	var rows []parquet.Row
	var js strings.Builder
	js.WriteString("[")
	for i := range 200 {
		o, d := codes[(i*i)%len(codes)], codes[(i/3)%len(codes)]
		date := int64(i) * 60_000_000
		rows = append(rows, flightRow(date, int64(i%17-8), int64(100+i), o, d))
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `{"date":%q,"delay":%d,"distance":%d,"origin":%q,"destination":%q}`,
			flightdata.FormatDate(date), i%17-8, 100+i, o, d)
	}
	js.WriteString("]")
	want, err := flightdata.DecodeJSON(context.Background(), strings.NewReader(js.String()), "many.json", flightdata.Options{})
	require.NoError(t, err)
	got, err := decodeFile(context.Background(), writeParquet(t, flightsSchema, 7, rows))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// rowError asserts that err is a *RowError naming file and row and wrapping
// target.
func rowError(t *testing.T, err error, file string, row int64, target error) {
	t.Helper()
	var re *flightdata.RowError
	if assert.ErrorAs(t, err, &re) {
		assert.Equal(t, file, re.File)
		assert.Equal(t, row, re.Row)
		assert.Contains(t, err.Error(), file)
	}
	if target != nil {
		assert.ErrorIs(t, err, target)
	}
	assert.True(t, strings.HasPrefix(err.Error(), "flightdata: "), err.Error())
}

func TestOpenJSONBadRows(t *testing.T) {
	good := `{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`
	for _, tc := range []struct {
		name, second string
		target       error
	}{
		{"bad date", `{"date":"2001/02/30 00:47","delay":1,"distance":1,"origin":"A","destination":"B"}`, flightdata.ErrBadDate},
		{"missing field", `{"date":"2001/01/01 00:47","distance":1,"origin":"A","destination":"B"}`, flightdata.ErrMissingField},
		{"fraction", `{"date":"2001/01/01 00:47","delay":1.5,"distance":1,"origin":"A","destination":"B"}`, flightdata.ErrSyntax},
		{"string delay", `{"date":"2001/01/01 00:47","delay":"1","distance":1,"origin":"A","destination":"B"}`, flightdata.ErrSyntax},
		{"out of range", `{"date":"2001/01/01 00:47","delay":1,"distance":4294967296,"origin":"A","destination":"B"}`, flightdata.ErrOutOfRange},
		{"empty airport", `{"date":"2001/01/01 00:47","delay":1,"distance":1,"origin":"","destination":"B"}`, flightdata.ErrBadAirport},
		{"not an object", `17`, flightdata.ErrSyntax},
		{"truncated", `{"date":"2001/01/01 00:47","delay":1,`, flightdata.ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.json", []byte("["+good+",\n"+tc.second+","+good+"]"))
			d, err := decodeFile(context.Background(), path)
			assert.Nil(t, d)
			rowError(t, err, path, 2, tc.target)
		})
	}
}

func TestOpenJSONBadDocument(t *testing.T) {
	for _, doc := range []string{``, `{}`, `[`, `[] []`, `"flights"`} {
		path := writeFile(t, "bad.json", []byte(doc))
		d, err := decodeFile(context.Background(), path)
		assert.Nil(t, d)
		assert.ErrorIs(t, err, flightdata.ErrSyntax, "%q", doc)
		assert.Contains(t, err.Error(), path)
	}
}

func TestOpenParquetBadRows(t *testing.T) {
	null := func(column int) func(parquet.Row) {
		return func(r parquet.Row) { r[column] = parquet.NullValue().Level(0, 0, column) }
	}
	for _, tc := range []struct {
		name   string
		spoil  func(parquet.Row)
		target error
	}{
		{"null date", null(0), flightdata.ErrNull},
		{"null origin", null(4), flightdata.ErrNull},
		{"delay out of range", func(r parquet.Row) { r[1] = parquet.Int64Value(1<<40).Level(0, 1, 1) }, flightdata.ErrOutOfRange},
		{"empty destination", func(r parquet.Row) { r[2] = parquet.ByteArrayValue(nil).Level(0, 1, 2) }, flightdata.ErrBadAirport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := append(append(threeRows(t), threeRows(t)...), threeRows(t)...)
			tc.spoil(rows[7])
			tc.spoil(rows[8]) // a later failure must not hide the first one
			path := writeParquet(t, flightsSchema, 2, rows)
			d, err := decodeFile(context.Background(), path)
			assert.Nil(t, d)
			rowError(t, err, path, 8, tc.target)
		})
	}
}

func TestOpenParquetWrongColumns(t *testing.T) {
	schemas := map[string]parquet.Group{
		"missing column": {
			"date": parquet.Timestamp(parquet.Microsecond), "delay": parquet.Int(64),
			"distance": parquet.Int(64), "origin": parquet.String(),
		},
		"string delay": {
			"date": parquet.Timestamp(parquet.Microsecond), "delay": parquet.String(),
			"distance": parquet.Int(64), "origin": parquet.String(), "destination": parquet.String(),
		},
		"millisecond dates": {
			"date": parquet.Timestamp(parquet.Millisecond), "delay": parquet.Int(64),
			"distance": parquet.Int(64), "origin": parquet.String(), "destination": parquet.String(),
		},
		"plain int dates": {
			"date": parquet.Int(64), "delay": parquet.Int(64),
			"distance": parquet.Int(64), "origin": parquet.String(), "destination": parquet.String(),
		},
		"repeated column": {
			"date": parquet.Timestamp(parquet.Microsecond), "delay": parquet.Int(64),
			"distance": parquet.Int(64), "origin": parquet.String(), "destination": parquet.Repeated(parquet.String()),
		},
	}
	for name, group := range schemas {
		t.Run(name, func(t *testing.T) {
			path := writeParquet(t, parquet.NewSchema("flights", group), 1, nil)
			d, err := decodeFile(context.Background(), path)
			assert.Nil(t, d)
			assert.ErrorIs(t, err, flightdata.ErrColumns)
			assert.Contains(t, err.Error(), path)
		})
	}
}

func TestOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := decodeFile(context.Background(), filepath.Join(dir, "absent.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "absent.json")

	_, err = decodeFile(context.Background(), writeFile(t, "flights.csv", []byte("date,delay\n")))
	assert.ErrorIs(t, err, flightdata.ErrUnknownFormat)
	assert.Contains(t, err.Error(), "flights.csv")

	path := writeFile(t, "corrupt.parquet", []byte("PAR1 this is not parquet PAR1"))
	_, err = decodeFile(context.Background(), path)
	assert.Error(t, err)
	assert.Contains(t, err.Error(), path)
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := writeParquet(t, flightsSchema, 1, threeRows(t))
	d, err := decodeFile(ctx, path)
	assert.Nil(t, d)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

func TestOrigins(t *testing.T) {
	d := wantThree(t)
	assert.Equal(t, 2, d.Origins(), "DTW and LAS; OAK is only a destination")
	assert.Zero(t, (&flightdata.Dataset{Airports: []string{"ATL"}}).Origins())
}
