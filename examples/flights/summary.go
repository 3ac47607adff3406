package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1   // bad input, or a check failed
	exitUsage       = 2   // as the flag package does
	exitInterrupted = 130 // 128 + SIGINT, as shells report Ctrl-C
)

// Verification outcomes.
const (
	verified    = "verified"
	notVerified = "not verified"
	skipped     = "skipped"
)

// counts are the dispatcher's counters at the end of the run.
type counts struct {
	Received  int64 `json:"received"`
	Succeeded int64 `json:"handled"`
	Failed    int64 `json:"failed"`
	Discarded int64 `json:"discarded"`
	InFlight  int64 `json:"in_flight"`
}

// percentiles of a latency, in nanoseconds in JSON.
type percentiles struct {
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
}

// airportRow is one line of the busiest-airports table.
type airportRow struct {
	Airport string `json:"airport"`
	airport.State
}

// summary is everything the program reports.
type summary struct {
	Input       string        `json:"input"`
	Partial     bool          `json:"partial"`
	Forced      bool          `json:"forced"`
	Rows        int64         `json:"rows"`
	Airports    int           `json:"airports"` // origins and destinations
	Parallelism int           `json:"parallelism"`
	Pool        int           `json:"pool"`
	HandlerCost time.Duration `json:"handler_cost_ns"`

	Decode      time.Duration `json:"decode_ns"`
	Dispatch    time.Duration `json:"dispatch_ns"`
	Verify      time.Duration `json:"verify_ns"`
	PerSecond   float64       `json:"exchanges_per_second"`
	Exchanges   counts        `json:"exchanges"`
	Undelivered int64         `json:"not_dispatched"` // rows never pulled: only a stopped run has any
	Lost        int64         `json:"lost"`
	Violations  int64         `json:"violations"`
	QueueWait   percentiles   `json:"queue_wait"`
	Handling    percentiles   `json:"handling"`
	Busiest     []airportRow  `json:"busiest"`

	Verification string `json:"verification"`
	Difference   string `json:"difference,omitempty"`
	Error        string `json:"error,omitempty"`
}

// account fills the derived counters from the dispatcher's counts: lost is
// what the accounting invariant misses (received = handled + failed +
// discarded + in flight), plus, for a run that was not stopped, the rows the
// dispatcher never received.
func (s *summary) account(c counts, elapsed time.Duration) {
	s.Exchanges, s.Dispatch = c, elapsed
	s.Lost = c.Received - c.Succeeded - c.Failed - c.Discarded - c.InFlight
	if s.Partial {
		s.Undelivered = s.Rows - c.Received
	} else {
		s.Lost += s.Rows - c.Received
	}
	if elapsed > 0 {
		s.PerSecond = float64(c.Succeeded+c.Failed) / elapsed.Seconds()
	}
}

// tally fills the violations and the table of the n busiest airports.
func (s *summary) tally(d *flightdata.Dataset, state func(i int) airport.State, n int) {
	rows := make([]airportRow, len(d.Airports))
	for i, code := range d.Airports {
		rows[i] = airportRow{Airport: code, State: state(i)}
		s.Violations += rows[i].Violations
	}
	slices.SortFunc(rows, func(a, b airportRow) int {
		return cmp.Or(cmp.Compare(b.Departures, a.Departures), strings.Compare(a.Airport, b.Airport))
	})
	s.Busiest = rows[:min(n, len(rows))]
}

// exitCode is 0 only for a complete run with nothing lost, no ordering
// violation, no failure and a verified state.
func (s *summary) exitCode() int {
	switch {
	case s.Partial:
		return exitInterrupted
	case s.Lost != 0 || s.Violations != 0 || s.Exchanges.Failed != 0 || s.Error != "" || s.Verification != verified:
		return exitFailed
	}
	return exitOK
}

func (s *summary) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func (s *summary) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	if s.Partial {
		how := "drained gracefully"
		if s.Forced {
			how = "stopped by force"
		}
		p("PARTIAL: interrupted and %s after %s of %s rows; these figures are not a complete run", how,
			thousands(s.Exchanges.Received), thousands(s.Rows))
	}
	p("input\t%s: %s rows, %d airports", s.Input, thousands(s.Rows), s.Airports)
	p("dispatcher\t%d groups, %d scheduler goroutines, handler cost %v", s.Parallelism, s.Pool, s.HandlerCost)
	p("decode\t%.3f s", s.Decode.Seconds())
	p("dispatch\t%.3f s\t%s exchanges/s", s.Dispatch.Seconds(), thousands(int64(s.PerSecond)))
	if s.Verification != skipped {
		p("verify\t%.3f s", s.Verify.Seconds())
	}
	c := s.Exchanges
	p("exchanges\treceived %s, handled %s, failed %s, discarded %s, in flight %s",
		thousands(c.Received), thousands(c.Succeeded), thousands(c.Failed), thousands(c.Discarded), thousands(c.InFlight))
	if s.Partial {
		p("not dispatched\t%s (stopped before reading them)", thousands(s.Undelivered))
	}
	p("lost\t%s", thousands(s.Lost))
	p("violations\t%s", thousands(s.Violations))
	p("queue wait\tp50 %v\tp99 %v", s.QueueWait.P50, s.QueueWait.P99)
	p("handling\tp50 %v\tp99 %v", s.Handling.P50, s.Handling.P99)
	if s.Error != "" {
		p("error\t%s", s.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nbusiest %d airports\n", len(s.Busiest))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "airport\tdepartures\tmean delay\tmax delay\tlongest on-time run\tlast departure\tviolations\t")
	for _, r := range s.Busiest {
		fmt.Fprintf(tw, "%s\t%s\t%.2f min\t%d min\t%d\t%s\t%d\t\n", r.Airport, thousands(r.Departures),
			r.MeanDelay, r.MaxDelay, r.LongestOnTimeRun, flightdata.FormatDate(r.LastDeparture), r.Violations)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	switch s.Verification {
	case skipped:
		_, err := fmt.Fprintln(w, "verification skipped: the run was interrupted")
		return err
	case verified:
		_, err := fmt.Fprintln(w, verified)
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", notVerified, s.Difference)
	return err
}

// thousands formats n with comma separators: 3000000 -> "3,000,000".
func thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return sign + b.String()
}
