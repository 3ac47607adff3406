package flightdata

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
)

// inputFormat is an input's encoding, told by the end of its name.
type inputFormat int

const (
	formatJSON inputFormat = iota
	formatJSONGzip
	formatParquet
)

// formatOf returns the format that name ends with.
func formatOf(name string) (inputFormat, bool) {
	switch {
	case strings.HasSuffix(name, ".json"):
		return formatJSON, true
	case strings.HasSuffix(name, ".json.gz"):
		return formatJSONGzip, true
	case strings.HasSuffix(name, ".parquet"):
		return formatParquet, true
	}
	return 0, false
}

// Options tune a decoding. The zero value ignores unknown JSON fields and
// reports no progress.
type Options struct {
	// Strict makes a JSON record with a field other than the five an error
	// wrapping ErrUnknownField; by default such fields are skipped. Extra
	// Parquet columns are ignored either way.
	Strict bool
	// Progress, when not nil, is advanced as the input is decoded, in bytes
	// of the input as stored (compressed, for .json.gz and Parquet): a
	// successful Input.Decode leaves it at Input.Size. Another goroutine may
	// Load it meanwhile; the decoder adds as it reads, every few kilobytes
	// or batch of rows.
	Progress *atomic.Int64
}

// Input is a file opened for decoding: its format is known from its name
// (.json, .json.gz or .parquet) and, for Parquet, its schema has been
// checked. It is not safe for concurrent use. Close releases the file.
type Input struct {
	name    string
	file    fs.File
	format  inputFormat
	size    int64
	parquet *parquetFile // for formatParquet
}

// Open opens the file at path for decoding, reading only a Parquet file's
// footer. Errors name the path and wrap
// os.ErrNotExist and the like, ErrDirectory, ErrUnknownFormat, or, for
// Parquet, ErrColumns or parquet-go's error for a corrupt footer.
func Open(path string) (*Input, error) {
	f, err := os.Open(path)
	return open(f, err, path)
}

// OpenFS is Open on a file of fsys, such as an embed.FS; a Parquet file must
// implement io.ReaderAt (os and embed files do).
func OpenFS(fsys fs.FS, name string) (*Input, error) {
	f, err := fsys.Open(name)
	return open(f, err, name)
}

func open(f fs.File, err error, name string) (*Input, error) {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the name is said once, by fileError
	}
	if err != nil {
		return nil, fileError(name, err)
	}
	in, err := newInput(f, name)
	if err != nil {
		f.Close()
		return nil, fileError(name, err)
	}
	return in, nil
}

func newInput(f fs.File, name string) (*Input, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, ErrDirectory
	}
	in := &Input{name: name, file: f, size: info.Size()}
	var ok bool
	if in.format, ok = formatOf(name); !ok {
		return nil, ErrUnknownFormat
	}
	if in.format != formatParquet {
		return in, nil
	}
	r, ok := f.(io.ReaderAt)
	if !ok {
		return nil, errors.New("flightdata: a Parquet file must be readable at an offset (io.ReaderAt)")
	}
	if in.parquet, err = openParquet(r, info.Size()); err != nil {
		return nil, err
	}
	in.size = in.parquet.size()
	return in, nil
}

// Name returns the name the input was opened with.
func (in *Input) Name() string { return in.name }

// Size returns the bytes Decode reads and Options.Progress reaches: the
// file's size for JSON (compressed for .json.gz), the compressed column
// chunks of the five columns for Parquet.
func (in *Input) Size() int64 { return in.size }

// Decode decodes the whole input: JSON with DecodeJSON (through gzip for
// .json.gz), Parquet with DecodeParquet. Call it once. The result holds 24
// bytes a flight; decoding takes about 2 µs a row for JSON and 0.5 µs for
// Parquet (BenchmarkDecode, on two cores).
func (in *Input) Decode(ctx context.Context, opts Options) (*Dataset, error) {
	switch in.format {
	case formatParquet:
		return in.parquet.decode(ctx, in.name, opts.Progress)
	case formatJSONGzip:
		var r io.Reader = in.file
		if opts.Progress != nil { // count what is read from the file, compressed
			r, opts.Progress = &countingReader{r: r, n: opts.Progress}, nil
		}
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fileError(in.name, err)
		}
		defer zr.Close()
		return DecodeJSON(ctx, zr, in.name, opts)
	}
	return DecodeJSON(ctx, in.file, in.name, opts)
}

// Close closes the file.
func (in *Input) Close() error { return in.file.Close() }

// countingReader adds the bytes it reads to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
