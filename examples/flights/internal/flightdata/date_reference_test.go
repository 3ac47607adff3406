package flightdata

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"pgregory.net/rapid"
)

// parseDateByHand is the parser ParseDate replaced, kept as its reference: it
// reads the digits itself and counts days with Howard Hinnant's
// days_from_civil.
func parseDateByHand(s string) (int64, error) {
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
	const microsPerMinute, minutesPerDay = 60 * 1000 * 1000, 24 * 60
	minutes := daysFromCivil(year, month, day)*minutesPerDay + hour*60 + minute
	return minutes * microsPerMinute, nil
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
// with years starting in March so that the leap day is the last of the year.
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

// FuzzParseDateAgainstByHand: ParseDate (time.Parse) and the hand-written
// parser accept the same strings and give the same instant; both errors wrap
// ErrBadDate.
func FuzzParseDateAgainstByHand(f *testing.F) {
	for _, s := range []string{
		"2001/01/01 00:47", "2000/02/29 23:59", "2001/02/29 00:00", "1900/02/29 12:00",
		"0000/01/01 00:00", "9999/12/31 23:59", "2001/01/01 1:47", "2001/01/01 01:7",
		"2001/1/01 00:00", "+001/01/01 00:00", "-001/01/01 00:00", "2001/01/01 24:00",
		"2001/01/01 00:60", "2001/01/01 00:00 ", " 2001/01/01 0:00", "2001/01/01 +1:00",
		"2001/01/-1 00:00", "2001-01-01 00:00", "0000/01/01  0:00", "", "ab",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := parseDateByHand(s)
		got, err := ParseDate(s)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: ParseDate error %v, by hand %v", s, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadDate) {
				t.Fatalf("%q: error %v does not wrap ErrBadDate", s, err)
			}
			return
		}
		if got != want {
			t.Fatalf("%q: ParseDate %d, by hand %d", s, got, want)
		}
	})
}

// editAlphabet is what dates are made of, and a sign: the characters an
// edit of a valid date may bring in.
const editAlphabet = "0123456789/: +-"

// agree fails t unless both parsers accept s with the same instant or both
// reject it.
func agree(t interface{ Fatalf(string, ...any) }, s string) {
	want, wantErr := parseDateByHand(s)
	got, err := ParseDate(s)
	if (err == nil) != (wantErr == nil) || got != want {
		t.Fatalf("%q: ParseDate %d, %v; by hand %d, %v", s, got, err, want, wantErr)
	}
}

// TestParseDateOneEdit: the two parsers agree on every string one edit
// (replace, insert or delete one character) away from a valid date, where
// their rules meet; two spaces before a one-digit hour is one of them.
func TestParseDateOneEdit(t *testing.T) {
	for _, base := range []string{"2001/01/01 00:47", "2000/02/29 23:59", "0000/01/01 00:00", "9999/12/31 23:59", "2001/02/28 19:05"} {
		agree(t, base)
		for i := range len(base) + 1 {
			if i < len(base) {
				agree(t, base[:i]+base[i+1:])
			}
			for _, c := range editAlphabet {
				if i < len(base) {
					agree(t, base[:i]+string(c)+base[i+1:])
				}
				agree(t, base[:i]+string(c)+base[i:])
			}
		}
	}
}

// TestParseDateNearMisses: the same agreement on dates of any field values,
// valid or not, spoilt by up to three edits.
func TestParseDateNearMisses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := []byte(fmt.Sprintf("%04d/%02d/%02d %02d:%02d",
			rapid.IntRange(0, 9999).Draw(t, "year"), rapid.IntRange(0, 13).Draw(t, "month"),
			rapid.IntRange(0, 32).Draw(t, "day"), rapid.IntRange(0, 24).Draw(t, "hour"),
			rapid.IntRange(0, 60).Draw(t, "minute")))
		for range rapid.IntRange(0, 3).Draw(t, "edits") {
			i := rapid.IntRange(0, len(s)).Draw(t, "at")
			c := editAlphabet[rapid.IntRange(0, len(editAlphabet)-1).Draw(t, "char")]
			switch op := rapid.IntRange(0, 2).Draw(t, "op"); {
			case op == 0 && i < len(s):
				s[i] = c
			case op == 1 && i < len(s):
				s = append(s[:i], s[i+1:]...)
			default:
				s = append(s[:i], append([]byte{c}, s[i:]...)...)
			}
		}
		agree(t, string(s))
	})
}

// sampleDates returns the date field of every record of the embedded sample.
func sampleDates(tb testing.TB) []string {
	tb.Helper()
	f, err := os.Open("../../data/flights-20k.json.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var records []struct{ Date string }
	if err := json.NewDecoder(zr).Decode(&records); err != nil {
		tb.Fatal(err)
	}
	dates := make([]string, len(records))
	for i, r := range records {
		dates[i] = r.Date
	}
	return dates
}

// BenchmarkParseDate compares the two parsers on the sample's 20,000 dates,
// one date per op.
func BenchmarkParseDate(b *testing.B) {
	dates := sampleDates(b)
	for _, p := range []struct {
		name  string
		parse func(string) (int64, error)
	}{{"time.Parse", ParseDate}, {"by-hand", parseDateByHand}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum int64
			i := 0
			for b.Loop() {
				v, err := p.parse(dates[i])
				if err != nil {
					b.Fatal(err)
				}
				sum += v
				if i++; i == len(dates) {
					i = 0
				}
			}
			if sum == 0 {
				b.Fatal("no date parsed") // keeps the results alive
			}
		})
	}
}
