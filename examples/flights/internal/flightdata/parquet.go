package flightdata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// columns are the Parquet columns read, indexing columnNames.
const (
	colDate = iota
	colDelay
	colDistance
	colOrigin
	colDestination
	numColumns
)

var columnNames = [numColumns]string{"date", "delay", "distance", "origin", "destination"}

// errPartFailed stops the decoding of the other row groups once one failed.
var errPartFailed = errors.New("flightdata: another row group failed")

// rowBatch is the number of rows read per ReadRows call: large enough to
// amortise the call, small enough to stay in cache.
const rowBatch = 1024

// DecodeParquet decodes a Parquet file with the columns date
// (INT64 TIMESTAMP(MICROS), UTC-adjusted or not: read as wall clock), delay and
// distance (INT64), origin and destination (BYTE_ARRAY); other columns are
// ignored, and no column may be repeated. A null in one of the five columns
// is an error. name labels errors; a failing row gives a *RowError naming the
// first failing row of the file. opts.Progress counts the compressed bytes of
// the five columns' chunks, each row group's in proportion to its rows
// decoded; opts.Strict does not apply.
//
// Row groups are decoded concurrently, up to GOMAXPROCS at a time, each into
// its own part of the result with its own airport table; the tables are then
// merged in file order, so the result is the same as a sequential decoding.
// Every goroutine started has exited when DecodeParquet returns.
func DecodeParquet(ctx context.Context, r io.ReaderAt, size int64, name string, opts Options) (*Dataset, error) {
	p, err := openParquet(r, size)
	if err != nil {
		return nil, fileError(name, err)
	}
	return p.decode(ctx, name, opts.Progress)
}

// parquetFile is a Parquet file whose schema has been checked.
type parquetFile struct {
	file  *parquet.File
	index [numColumns]int // leaf column of each of the five
	// chunkBytes holds, per row group, the compressed size of its five
	// column chunks: the progress a row group is worth.
	chunkBytes []int64
}

func openParquet(r io.ReaderAt, size int64) (*parquetFile, error) {
	pf, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, err
	}
	index, err := columnIndexes(pf.Schema())
	if err != nil {
		return nil, err
	}
	p := &parquetFile{file: pf, index: index}
	for _, rg := range pf.Metadata().RowGroups {
		var n int64
		for _, c := range index {
			if c < len(rg.Columns) {
				n += rg.Columns[c].MetaData.TotalCompressedSize
			}
		}
		p.chunkBytes = append(p.chunkBytes, n)
	}
	return p, nil
}

// size is the progress of a whole decoding.
func (p *parquetFile) size() int64 {
	var n int64
	for _, b := range p.chunkBytes {
		n += b
	}
	return n
}

func (p *parquetFile) decode(ctx context.Context, name string, progress *atomic.Int64) (*Dataset, error) {
	groups := p.file.RowGroups()
	parts := make([]*builder, len(groups))
	errs := make([]error, len(groups))
	flights := make([]Flight, p.file.NumRows())
	var start int64
	for g, rg := range groups {
		n := rg.NumRows()
		if start+n > int64(len(flights)) {
			return nil, fileError(name, fmt.Errorf("%w: row groups hold more rows than the file declares", ErrColumns))
		}
		parts[g] = &builder{
			Dataset: Dataset{Flights: flights[start : start : start+n]},
			index:   make(map[string]Airport),
		}
		start += n
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(groups)) {
		wg.Go(func() {
			rows := rowBuffer(len(p.file.Schema().Columns()))
			for g := int(next.Add(1) - 1); g < len(groups); g = int(next.Add(1) - 1) {
				share := rowShare{counter: progress, rows: groups[g].NumRows()}
				if g < len(p.chunkBytes) {
					share.bytes = p.chunkBytes[g]
				}
				if errs[g] = parts[g].readRowGroup(ctx, groups[g], p.index, rows, &share); errs[g] != nil {
					cancel(errPartFailed)
				}
			}
		})
	}
	wg.Wait()
	var first int64 // file-wide number of the part's first row, minus one
	for g, err := range errs {
		var rowErr *RowError
		switch {
		case errors.As(err, &rowErr):
			rowErr.File, rowErr.Row = name, first+rowErr.Row
			return nil, rowErr
		case err != nil && !errors.Is(err, errPartFailed):
			return nil, fileError(name, err)
		case err == nil && int64(len(parts[g].Flights)) != groups[g].NumRows():
			return nil, &RowError{File: name, Row: first + int64(len(parts[g].Flights)) + 1,
				Err: fmt.Errorf("%w: row group ends before the rows it declares", ErrColumns)}
		}
		first += groups[g].NumRows()
	}
	return merge(flights, parts)
}

// rowShare advances a progress counter by a row group's bytes in proportion
// to its rows decoded; it reaches bytes exactly with the last row.
type rowShare struct {
	counter     *atomic.Int64 // nil: no progress wanted
	bytes, rows int64
	added       int64
}

// decoded records that the first n rows of the row group are decoded.
func (s *rowShare) decoded(n int64) {
	if s.counter == nil || s.rows == 0 {
		return
	}
	due := s.bytes * min(n, s.rows) / s.rows
	s.counter.Add(due - s.added)
	s.added = due
}

// merge builds one airport table from the parts' tables, in file order, and
// rewrites each part's indexes into it.
func merge(flights []Flight, parts []*builder) (*Dataset, error) {
	all := newBuilder(0)
	all.Flights = flights
	for _, part := range parts {
		remap := make([]Airport, len(part.Airports))
		for local, code := range part.Airports {
			global, err := all.airport([]byte(code), "origin or destination")
			if err != nil {
				return nil, err
			}
			remap[local] = global
		}
		for i := range part.Flights {
			f := &part.Flights[i]
			f.Origin, f.Destination = remap[f.Origin], remap[f.Destination]
		}
	}
	return &all.Dataset, nil
}

// columnIndexes checks the schema and returns the leaf index of each column.
func columnIndexes(schema *parquet.Schema) ([numColumns]int, error) {
	var index [numColumns]int
	for _, path := range schema.Columns() {
		if leaf, _ := schema.Lookup(path...); leaf.MaxRepetitionLevel > 0 {
			return index, fmt.Errorf("%w: column %q is repeated", ErrColumns, leaf.Path)
		}
	}
	for c, colName := range columnNames {
		leaf, ok := schema.Lookup(colName)
		if !ok {
			return index, fmt.Errorf("%w: no column %q", ErrColumns, colName)
		}
		typ := leaf.Node.Type()
		want := parquet.Int64
		if c == colOrigin || c == colDestination {
			want = parquet.ByteArray
		}
		if typ.Kind() != want || (c == colDate && !isMicros(typ.LogicalType())) {
			return index, fmt.Errorf("%w: column %q has type %s", ErrColumns, colName, typ)
		}
		index[c] = leaf.ColumnIndex
	}
	return index, nil
}

func isMicros(lt *format.LogicalType) bool {
	if lt == nil {
		return false
	}
	ts, ok := lt.Value.(*format.TimestampType)
	return ok && ts.Unit.Value != nil && ts.Unit.Value.Duration() == time.Microsecond
}

// rowBuffer returns rowBatch rows with room for the values of every column,
// in one allocation: ReadRows appends a row's values column by column and
// would otherwise grow each row several times.
func rowBuffer(columns int) []parquet.Row {
	values := make([]parquet.Value, rowBatch*columns)
	rows := make([]parquet.Row, rowBatch)
	for i := range rows {
		rows[i] = values[i*columns : i*columns : (i+1)*columns]
	}
	return rows
}

// readRowGroup appends the rows of rg, telling share after each batch; a
// *RowError numbers rows from 1 at the start of rg. It fails if rg holds more rows than it declares, as the part
// reserved for it would overflow.
func (b *builder) readRowGroup(ctx context.Context, rg parquet.RowGroup, index [numColumns]int, rows []parquet.Row, share *rowShare) error {
	reader := rg.Rows()
	defer reader.Close()
	for row := int64(0); ; {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		n, err := reader.ReadRows(rows)
		for _, values := range rows[:n] {
			row++
			if len(b.Flights) == cap(b.Flights) {
				return &RowError{Row: row, Err: fmt.Errorf("%w: row group holds more rows than it declares", ErrColumns)}
			}
			if err := b.addParquet(values, index); err != nil {
				return &RowError{Row: row, Err: err}
			}
		}
		share.decoded(row)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &RowError{Row: row + 1, Err: err}
		}
	}
}

func (b *builder) addParquet(values parquet.Row, index [numColumns]int) error {
	for c, i := range index {
		if values[i].IsNull() {
			return fmt.Errorf("%w in column %q", ErrNull, columnNames[c])
		}
	}
	return b.add(values[index[colDate]].Int64(), values[index[colDelay]].Int64(),
		values[index[colDistance]].Int64(), values[index[colOrigin]].ByteArray(),
		values[index[colDestination]].ByteArray())
}
