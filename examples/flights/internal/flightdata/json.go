package flightdata

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// jsonRow has pointer fields so that a missing field is told apart from a
// zero value.
type jsonRow struct {
	Date        *string `json:"date"`
	Delay       *int64  `json:"delay"`
	Distance    *int64  `json:"distance"`
	Origin      *string `json:"origin"`
	Destination *string `json:"destination"`
}

// DecodeJSON decodes a JSON array of records
// {"date":"YYYY/MM/DD HH:MM","delay":int,"distance":int,"origin":"IATA","destination":"IATA"},
// streaming one record at a time. Every field is required; other fields are
// skipped, or with opts.Strict an error wrapping ErrUnknownField.
// opts.Progress counts the bytes read from r. name labels errors; a failing
// record gives a *RowError. ctx is checked every 4,096 records.
func DecodeJSON(ctx context.Context, r io.Reader, name string, opts Options) (*Dataset, error) {
	if opts.Progress != nil {
		r = &countingReader{r: r, n: opts.Progress}
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	if opts.Strict {
		dec.DisallowUnknownFields()
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fileError(name, fmt.Errorf("%w: want an array of records", ErrSyntax))
	}
	b := newBuilder(0)
	var row int64
	for dec.More() {
		row++
		if row%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fileError(name, err)
			}
		}
		var jr jsonRow
		if err := dec.Decode(&jr); err != nil {
			return nil, &RowError{File: name, Row: row, Err: decodeError(err)}
		}
		if err := b.addJSON(&jr); err != nil {
			return nil, &RowError{File: name, Row: row, Err: err}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, &RowError{File: name, Row: row + 1, Err: fmt.Errorf("%w: want a record or the end of the array", ErrSyntax)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fileError(name, fmt.Errorf("%w: data after the array", ErrSyntax))
	}
	return &b.Dataset, nil
}

// unknownField starts encoding/json's error for a field that
// DisallowUnknownFields refuses; the package has no error type for it.
const unknownField = "json: unknown field "

// decodeError classifies an error of json.Decoder.Decode.
func decodeError(err error) error {
	if field, ok := strings.CutPrefix(err.Error(), unknownField); ok {
		return fmt.Errorf("%w %s", ErrUnknownField, field)
	}
	return fmt.Errorf("%w: %w", ErrSyntax, err)
}

func (b *builder) addJSON(jr *jsonRow) error {
	for _, f := range [...]struct {
		name    string
		missing bool
	}{
		{"date", jr.Date == nil}, {"delay", jr.Delay == nil}, {"distance", jr.Distance == nil},
		{"origin", jr.Origin == nil}, {"destination", jr.Destination == nil},
	} {
		if f.missing {
			return fmt.Errorf("%w %q", ErrMissingField, f.name)
		}
	}
	departure, err := ParseDate(*jr.Date)
	if err != nil {
		return err
	}
	return b.add(departure, *jr.Delay, *jr.Distance, []byte(*jr.Origin), []byte(*jr.Destination))
}
