package job

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	ExitOK     = 0
	ExitFailed = 1 // bad input, or a check failed
	ExitUsage  = 2 // as the flag package does
)

// Verification outcomes.
const (
	Verified    = "verified"
	NotVerified = "not verified"
	Skipped     = "skipped"
)

// Counts are the dispatcher's counters at the end of the run.
type Counts struct {
	Received  int64 `json:"received"`
	Succeeded int64 `json:"handled"`
	Failed    int64 `json:"failed"`
	Discarded int64 `json:"discarded"`
	InFlight  int64 `json:"in_flight"`
}

// AirportRow is one line of the busiest-airports table.
type AirportRow struct {
	Airport string `json:"airport"`
	airport.State
}

// Summary is everything the program reports.
type Summary struct {
	Input   string `json:"input"`
	Source  string `json:"source"` // flux, rxgo or jetstream
	Partial bool   `json:"partial"`
	Signal  string `json:"signal,omitempty"` // the one that stopped a partial run: SIGINT or SIGTERM
	Forced  bool   `json:"forced"`
	Rows    int64  `json:"rows"` // flights
	// Airports counts the origin airports, one aggregate each; AirportsNamed
	// adds those that are only destinations.
	Airports      int `json:"airports"`
	AirportsNamed int `json:"airports_named"`
	// Aggregates counts the airports the dispatcher handled a flight of:
	// Airports, unless the run was stopped.
	Aggregates  int           `json:"aggregates"`
	Parallelism int           `json:"parallelism"`
	Pool        int           `json:"pool"`
	HandlerCost time.Duration `json:"handler_cost_ns"`

	Decode      time.Duration `json:"decode_ns"`
	Dispatch    time.Duration `json:"dispatch_ns"`
	Verify      time.Duration `json:"verify_ns"`
	PerSecond   float64       `json:"exchanges_per_second"`
	Exchanges   Counts        `json:"exchanges"`
	Undelivered int64         `json:"not_dispatched"` // rows never pulled: only a stopped run has any
	Lost        int64         `json:"lost"`
	Violations  int64         `json:"violations"`
	QueueWait   Percentiles   `json:"queue_wait"`
	Handling    Percentiles   `json:"handling"`
	Busiest     []AirportRow  `json:"busiest"`
	// ReadBack is -source rxgo's count of the outcomes read back.
	ReadBack any `json:"read_back,omitempty"`
	// Broker is examples/flights/jetstream's run through the broker.
	Broker any `json:"broker,omitempty"`

	Verification string `json:"verification"`
	Difference   string `json:"difference,omitempty"`
	Error        string `json:"error,omitempty"`

	status     int    // the exit status of a partial run
	sourceLine string // Replayed.SourceLine
	lines      []Line // Replayed.Lines
}

// stoppedBy records the signal that stopped the run, if any, and whether a
// second one forced the stop.
func (s *Summary) stoppedBy(sig os.Signal, forced bool) {
	if sig == nil {
		return
	}
	s.Partial, s.Forced = true, forced
	s.Signal, s.status = SignalName(sig), SignalStatus(sig)
}

// account fills the derived counters from the dispatcher's counts: lost is
// what the accounting invariant misses (received = handled + failed +
// discarded + in flight), plus, for a run that was not stopped, the rows the
// dispatcher never received; replays, received twice, count once.
func (s *Summary) account(c Counts, replays int64, elapsed time.Duration) {
	s.Exchanges, s.Dispatch = c, elapsed
	s.Lost = c.Received - c.Succeeded - c.Failed - c.Discarded - c.InFlight
	if s.Partial {
		s.Undelivered = s.Rows - (c.Received - replays)
	} else {
		s.Lost += s.Rows - (c.Received - replays)
	}
	if elapsed > 0 {
		s.PerSecond = float64(c.Succeeded+c.Failed) / elapsed.Seconds()
	}
}

// tally fills the aggregates handled, the violations and the table of the n
// busiest airports.
func (s *Summary) tally(d *flightdata.Dataset, state func(i int) airport.State, n int) {
	var rows []AirportRow
	for i, code := range d.Airports {
		if st := state(i); st.Departures > 0 {
			rows = append(rows, AirportRow{Airport: code, State: st})
			s.Violations += st.Violations
		}
	}
	s.Aggregates = len(rows)
	slices.SortFunc(rows, func(a, b AirportRow) int {
		return cmp.Or(cmp.Compare(b.Departures, a.Departures), strings.Compare(a.Airport, b.Airport))
	})
	s.Busiest = rows[:min(n, len(rows))]
}

// exitCode is 0 only for a complete run with nothing lost, no ordering
// violation, no failure and a verified state.
func (s *Summary) exitCode() int {
	switch {
	case s.Partial:
		return s.status
	case s.Lost != 0 || s.Violations != 0 || s.Exchanges.Failed != 0 || s.Error != "" || s.Verification != Verified:
		return ExitFailed
	}
	return ExitOK
}

func (s *Summary) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func (s *Summary) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	if s.Partial {
		how := "drained gracefully"
		if s.Forced {
			how = "stopped by force"
		}
		p("PARTIAL: interrupted by %s and %s after %s of %s; these figures are not a complete run",
			s.Signal, how, Thousands(s.Exchanges.Received), Count(s.Rows, "flight"))
	}
	destinationsOnly := ""
	switch n := s.AirportsNamed - s.Airports; {
	case n == 1:
		destinationsOnly = " (and 1 airport that is only a destination)"
	case n > 1:
		destinationsOnly = fmt.Sprintf(" (and %s that are only destinations)", Count(int64(n), "airport"))
	}
	p("input\t%s: %s from %s%s", s.Input, Count(s.Rows, "flight"), Count(int64(s.Airports), "airport"), destinationsOnly)
	p("aggregates\t%s handled, one per origin airport (%s)", Thousands(int64(s.Aggregates)), AirportAggregate)
	p("dispatcher\t%s, %s, handler cost %v", Count(int64(s.Parallelism), "group"),
		Count(int64(s.Pool), "scheduler goroutine"), s.HandlerCost)
	p("source\t%s", s.sourceLine)
	for _, l := range s.lines {
		p("%s\t%s", l.Label, l.Text)
	}
	p("decode\t%.3f s", s.Decode.Seconds())
	p("dispatch\t%.3f s\t%s exchanges/s", s.Dispatch.Seconds(), Thousands(int64(s.PerSecond)))
	if s.Verification != Skipped {
		p("verify\t%.3f s", s.Verify.Seconds())
	}
	c := s.Exchanges
	p("exchanges\treceived %s, handled %s, failed %s, discarded %s, in flight %s",
		Thousands(c.Received), Thousands(c.Succeeded), Thousands(c.Failed), Thousands(c.Discarded), Thousands(c.InFlight))
	if s.Partial {
		p("not dispatched\t%s (stopped before reading them)", Thousands(s.Undelivered))
	}
	p("lost\t%s", Thousands(s.Lost))
	p("violations\t%s", Thousands(s.Violations))
	p("queue wait\tp50 %v\tp99 %v", s.QueueWait.P50, s.QueueWait.P99)
	p("handling\tp50 %v\tp99 %v", s.Handling.P50, s.Handling.P99)
	if s.Error != "" {
		p("error\t%s", s.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nbusiest %s\n", Count(int64(len(s.Busiest)), "airport"))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "airport\tdepartures\tmean delay\tmax delay\tlongest on-time run\tlast departure\tviolations\t")
	for _, r := range s.Busiest {
		fmt.Fprintf(tw, "%s\t%s\t%.2f min\t%d min\t%d\t%s\t%d\t\n", r.Airport, Thousands(r.Departures),
			r.MeanDelay, r.MaxDelay, r.LongestOnTimeRun, flightdata.FormatDate(r.LastDeparture), r.Violations)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	switch s.Verification {
	case Skipped:
		_, err := fmt.Fprintln(w, "verification skipped: the run was interrupted")
		return err
	case Verified:
		_, err := fmt.Fprintln(w, Verified)
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", NotVerified, s.Difference)
	return err
}

// Count says n things: Count(1, "flight") is "1 flight", Count(3000000,
// "flight") "3,000,000 flights".
func Count(n int64, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return Thousands(n) + " " + noun
}

// Thousands formats n with comma separators: 3000000 -> "3,000,000".
func Thousands(n int64) string {
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
