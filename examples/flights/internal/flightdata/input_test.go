package flightdata_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// decodeWithProgress decodes the input at path and returns it with the
// progress counted and the input's size.
func decodeWithProgress(t *testing.T, path string, opts flightdata.Options) (d *flightdata.Dataset, progress, size int64) {
	t.Helper()
	in, err := flightdata.Open(path)
	require.NoError(t, err)
	defer in.Close()
	var p atomic.Int64
	opts.Progress = &p
	d, err = in.Decode(context.Background(), opts)
	require.NoError(t, err)
	return d, p.Load(), in.Size()
}

// TestOpenFormats: the same flights as JSON, gzipped JSON and Parquet of one
// or several row groups decode alike, and the progress reaches the size.
func TestOpenFormats(t *testing.T) {
	jsonPath := writeFile(t, "three.json", []byte(threeFlights))
	gzPath := writeFile(t, "three.json.gz", gzipped(t, []byte(threeFlights)))
	for _, tc := range []struct {
		path     string
		fileSize bool // Size is the file's size
	}{
		{jsonPath, true},
		{gzPath, true},
		{writeParquet(t, flightsSchema, 1, threeRows(t)), false},
		{writeParquet(t, flightsSchema, 3, threeRows(t)), false},
	} {
		d, progress, size := decodeWithProgress(t, tc.path, flightdata.Options{})
		assert.Equal(t, wantThree(t), d, tc.path)
		assert.Equal(t, size, progress, "%s: progress ends at the size", tc.path)
		info, err := os.Stat(tc.path)
		require.NoError(t, err)
		if tc.fileSize {
			assert.Equal(t, info.Size(), size, tc.path)
		} else {
			assert.Positive(t, size, tc.path)
			assert.Less(t, size, info.Size(), "%s: the column chunks, not the footer", tc.path)
		}
	}
}

// TestParquetProgressOnTheSample: on 20,000 rows in row groups of 2,000 the
// progress reaches the chunks' size exactly, whatever the rounding of the
// shares.
func TestParquetProgressOnTheSample(t *testing.T) {
	js := sampleJSON(t)
	d, err := flightdata.DecodeJSON(context.Background(), bytes.NewReader(js), "sample.json", flightdata.Options{})
	require.NoError(t, err)
	path := writeFile(t, "sample.parquet", parquetBytes(t, flightsSchema, 2_000, datasetRows(d)))
	got, progress, size := decodeWithProgress(t, path, flightdata.Options{})
	assert.Equal(t, d, got)
	assert.Equal(t, size, progress)
}

func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(dir, "flights.json")
	require.NoError(t, os.Mkdir(named, 0o700))
	for _, path := range []string{dir, named} {
		in, err := flightdata.Open(path)
		assert.Nil(t, in)
		assert.ErrorIs(t, err, flightdata.ErrDirectory)
		assert.Equal(t, "flightdata: "+path+": is a directory (want a .json, .json.gz or .parquet file)", err.Error())
	}
}

// TestUnknownFields: a field beyond the five is skipped, unless Strict.
func TestUnknownFields(t *testing.T) {
	doc := `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 01:10","delay":-5,"carrier":{"code":"AA","names":["x"]},"distance":2399,"origin":"LAS","destination":"DTW"},
	{"date":"2001/01/01 01:24","delay":0,"distance":407,"origin":"DTW","destination":"OAK","tail":"N123"}]`
	path := writeFile(t, "extra.json", []byte(doc))
	d, _, _ := decodeWithProgress(t, path, flightdata.Options{})
	assert.Equal(t, wantThree(t), d)

	in, err := flightdata.Open(path)
	require.NoError(t, err)
	defer in.Close()
	d, err = in.Decode(context.Background(), flightdata.Options{Strict: true})
	assert.Nil(t, d)
	rowError(t, err, path, 2, flightdata.ErrUnknownField)
	assert.Equal(t, "flightdata: "+path+`: row 2: unknown field "carrier"`, err.Error())
}

func TestOpenFS(t *testing.T) {
	fsys := fstest.MapFS{
		"data/three.json.gz":    {Data: gzipped(t, []byte(threeFlights))},
		"data/three.parquet":    {Data: parquetBytes(t, flightsSchema, 2, threeRows(t))},
		"data/not-gzip.json.gz": {Data: []byte(threeFlights)},
	}
	for _, name := range []string{"data/three.json.gz", "data/three.parquet"} {
		in, err := flightdata.OpenFS(fsys, name)
		require.NoError(t, err)
		assert.Equal(t, name, in.Name())
		d, err := in.Decode(context.Background(), flightdata.Options{})
		require.NoError(t, err)
		assert.Equal(t, wantThree(t), d, name)
		require.NoError(t, in.Close())
	}

	in, err := flightdata.OpenFS(fsys, "data/not-gzip.json.gz")
	require.NoError(t, err)
	_, err = in.Decode(context.Background(), flightdata.Options{})
	assert.ErrorIs(t, err, gzip.ErrHeader)
	assert.Contains(t, err.Error(), "data/not-gzip.json.gz")

	_, err = flightdata.OpenFS(fsys, "data")
	assert.ErrorIs(t, err, flightdata.ErrDirectory)
	_, err = flightdata.OpenFS(fsys, "data/absent.json")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = flightdata.OpenFS(streamFS{fsys}, "data/three.parquet")
	assert.ErrorContains(t, err, "io.ReaderAt")
}

// streamFS hides every interface of its files but fs.File.
type streamFS struct{ fsys fs.FS }

func (s streamFS) Open(name string) (fs.File, error) {
	f, err := s.fsys.Open(name)
	return streamFile{f}, err
}

type streamFile struct{ f fs.File }

func (s streamFile) Stat() (fs.FileInfo, error) { return s.f.Stat() }
func (s streamFile) Read(p []byte) (int, error) { return s.f.Read(p) }
func (s streamFile) Close() error               { return s.f.Close() }
