package flightdata

import (
	"fmt"
	"time"
)

// DateLayout is the layout of the JSON date field, in time package notation.
const DateLayout = "2006/01/02 15:04"

// ParseDate parses "YYYY/MM/DD HH:MM" (exactly that: 16 bytes, zero-padded,
// year 0000-9999, a real calendar day, hour 00-23, minute 00-59) into
// wall-clock microseconds since 1970/01/01 00:00, no time zone — the unit of
// Parquet's TIMESTAMP(MICROS, isAdjustedToUTC=false). Anything else returns an
// error wrapping ErrBadDate. It allocates only on error.
func ParseDate(s string) (int64, error) {
	t, err := time.Parse(DateLayout, s)
	// time.Parse is looser in two places: the layout's space matches a run
	// of spaces and its hour ("15") takes one digit. With 16 bytes and no
	// second space, only the zero-padded form is left.
	if err != nil || len(s) != len(DateLayout) || s[11] == ' ' {
		return 0, fmt.Errorf("%w %q (want YYYY/MM/DD HH:MM)", ErrBadDate, s)
	}
	return t.UnixMicro(), nil
}

// FormatDate renders wall-clock microseconds as DateLayout, dropping seconds.
func FormatDate(micros int64) string {
	return time.UnixMicro(micros).UTC().Format(DateLayout)
}
