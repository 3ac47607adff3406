package flightdata_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func TestParseDate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // RFC 3339 in UTC, or "" for an error
	}{
		{"2001/01/01 00:47", "2001-01-01T00:47:00Z"},
		{"1970/01/01 00:00", "1970-01-01T00:00:00Z"},
		{"1969/12/31 23:59", "1969-12-31T23:59:00Z"},
		{"2000/02/29 12:00", "2000-02-29T12:00:00Z"},
		{"0000/03/01 00:00", "0000-03-01T00:00:00Z"},
		{"9999/12/31 23:59", "9999-12-31T23:59:00Z"},
		{"2001/02/29 12:00", ""},
		{"1900/02/29 12:00", ""},
		{"2001/13/01 00:00", ""},
		{"2001/00/10 00:00", ""},
		{"2001/04/31 00:00", ""},
		{"2001/01/00 00:00", ""},
		{"2001/01/01 24:00", ""},
		{"2001/01/01 00:60", ""},
		{"2001-01-01 00:00", ""},
		{"2001/1/01 00:00", ""},
		{"2001/01/01 00:00 ", ""},
		{"+001/01/01 00:00", ""},
		{"", ""},
	} {
		got, err := flightdata.ParseDate(tc.in)
		if tc.want == "" {
			assert.ErrorIs(t, err, flightdata.ErrBadDate, tc.in)
			continue
		}
		want, perr := time.Parse(time.RFC3339, tc.want)
		require.NoError(t, perr)
		if assert.NoError(t, err, tc.in) {
			assert.Equal(t, want.UnixMicro(), got, tc.in)
			assert.Equal(t, tc.in, flightdata.FormatDate(got))
		}
	}
}
