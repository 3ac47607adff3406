package flightdata

import (
	"fmt"
	"time"
)

// DateLayout is the layout of the JSON date field, in time package notation.
const DateLayout = "2006/01/02 15:04"

const (
	microsPerMinute = 60 * 1000 * 1000
	minutesPerDay   = 24 * 60
)

// ParseDate parses "YYYY/MM/DD HH:MM" (exactly that: 16 bytes, zero-padded,
// year 0000-9999, a real calendar day, hour 00-23, minute 00-59) into
// wall-clock microseconds since 1970/01/01 00:00, no time zone — the unit of
// Parquet's TIMESTAMP(MICROS, isAdjustedToUTC=false). Anything else returns an
// error wrapping ErrBadDate. It allocates only on error, which is why it does
// not go through time.Parse.
func ParseDate(s string) (int64, error) {
	if len(s) != len(DateLayout) || s[4] != '/' || s[7] != '/' || s[10] != ' ' || s[13] != ':' {
		return 0, fmt.Errorf("%w %q (want YYYY/MM/DD HH:MM)", ErrBadDate, s)
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || month < 1 || month > 12 ||
		day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 {
		return 0, fmt.Errorf("%w %q (want YYYY/MM/DD HH:MM)", ErrBadDate, s)
	}
	minutes := daysFromCivil(year, month, day)*minutesPerDay + hour*60 + minute
	return minutes * microsPerMinute, nil
}

// FormatDate renders wall-clock microseconds as DateLayout, dropping seconds.
func FormatDate(micros int64) string {
	return time.UnixMicro(micros).UTC().Format(DateLayout)
}

// digits parses a run of ASCII decimal digits.
func digits(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	return n, true
}

func daysIn(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil counts days from 1970-01-01 to the proleptic Gregorian date,
// with years starting in March so that the leap day is the last of the year
// (Howard Hinnant's days_from_civil).
func daysFromCivil(year, month, day int64) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 {
		era = (year - 399) / 400
	}
	yearOfEra := year - era*400
	dayOfYear := (153*((month+9)%12)+2)/5 + day - 1
	dayOfEra := yearOfEra*365 + yearOfEra/4 - yearOfEra/100 + dayOfYear
	return era*146097 + dayOfEra - 719468
}
