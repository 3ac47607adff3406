package flightdata

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownFormat is returned by Open for a name that ends in none of
	// .json, .json.gz and .parquet.
	ErrUnknownFormat = errors.New("flightdata: unknown input format (want .json, .json.gz or .parquet)")
	// ErrDirectory is returned by Open for a directory.
	ErrDirectory = errors.New("flightdata: is a directory (want a .json, .json.gz or .parquet file)")
	// ErrUnknownField is wrapped, under Options.Strict, for a JSON record
	// with a field other than the five.
	ErrUnknownField = errors.New("flightdata: unknown field")
	// ErrBadDate is wrapped by every date that is not "YYYY/MM/DD HH:MM" naming
	// a real calendar minute.
	ErrBadDate = errors.New("flightdata: bad date")
	// ErrMissingField is wrapped when a JSON record lacks one of the five
	// fields or holds null in it.
	ErrMissingField = errors.New("flightdata: missing or null field")
	// ErrNull is wrapped when a Parquet value of a required field is null.
	ErrNull = errors.New("flightdata: null value")
	// ErrOutOfRange is wrapped when delay or distance does not fit in 32 bits.
	ErrOutOfRange = errors.New("flightdata: value out of range")
	// ErrBadAirport is wrapped for an empty airport code.
	ErrBadAirport = errors.New("flightdata: bad airport code")
	// ErrTooManyAirports is wrapped when a file names more distinct airports
	// than an Airport index can hold (65,536).
	ErrTooManyAirports = errors.New("flightdata: too many distinct airports")
	// ErrColumns is wrapped when a Parquet file lacks a column or has one of
	// the wrong type.
	ErrColumns = errors.New("flightdata: wrong columns")
	// ErrSyntax is wrapped when the JSON document is not an array of records.
	ErrSyntax = errors.New("flightdata: malformed JSON")
)

// RowError is a decoding failure caused by one row of a file.
type RowError struct {
	// File is the name of the input, as given to the decoder.
	File string
	// Row is the 1-based position of the row in the file; when the file's
	// own structure is corrupt, the first row that could not be read.
	Row int64
	// Err is the cause; it wraps one of the package's sentinels or a
	// decoder's error.
	Err error
}

// Error reads "flightdata: FILE: row N: cause".
func (e *RowError) Error() string {
	return fmt.Sprintf("flightdata: %s: row %d: %s", e.File, e.Row,
		strings.TrimPrefix(e.Err.Error(), "flightdata: "))
}

// Unwrap returns the cause.
func (e *RowError) Unwrap() error { return e.Err }

// fileError prefixes err with the package and the file name, for failures
// that concern the whole file rather than one row.
func fileError(file string, err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, "flightdata: ") {
		// Our own sentinel: keep one package prefix, in front.
		return fmt.Errorf("flightdata: %s: %s%w", file, strings.TrimPrefix(msg, "flightdata: "), silent{err})
	}
	return fmt.Errorf("flightdata: %s: %w", file, err)
}

// silent wraps an error for errors.Is/As without adding to the message.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }
