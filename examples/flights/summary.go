package main

import (
	"cmp"
	"encoding/json"
	"errors"
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
	exitOK     = 0
	exitFailed = 1 // bad input, or a check failed
	exitUsage  = 2 // as the flag package does
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
	Input   string `json:"input"`
	Source  string `json:"source"` // flux or rxgo (-source)
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
	Exchanges   counts        `json:"exchanges"`
	Undelivered int64         `json:"not_dispatched"` // rows never pulled: only a stopped run has any
	Lost        int64         `json:"lost"`
	Violations  int64         `json:"violations"`
	QueueWait   percentiles   `json:"queue_wait"`
	Handling    percentiles   `json:"handling"`
	Busiest     []airportRow  `json:"busiest"`
	// ReadBack is -source rxgo's count of the outcomes read back.
	ReadBack *readBackSummary `json:"read_back,omitempty"`
	// Broker is -source jetstream's run through the broker.
	Broker *brokerSummary `json:"broker,omitempty"`

	Verification string `json:"verification"`
	Difference   string `json:"difference,omitempty"`
	Error        string `json:"error,omitempty"`

	status int // the exit status of a partial run
}

// readBackSummary is what -source rxgo read back through the dispatcher's
// Results: Read outcomes, Dropped ones (a forced stop's), and whether they
// agree with the dispatcher's Stats.
type readBackSummary struct {
	Read    int64 `json:"read"`
	Dropped int64 `json:"dropped"`
	Agrees  bool  `json:"agrees"`
}

// readBack records rb, if any; err is the run's error, which wraps
// errDisagree when the outcomes read back disagree with Stats.
func (s *summary) readBack(rb *readBack, err error) {
	if rb != nil {
		s.ReadBack = &readBackSummary{Read: rb.counts.Received, Dropped: rb.dropped, Agrees: !errors.Is(err, errDisagree)}
	}
}

// stoppedBy records the signal that stopped the run, if any, and whether a
// second one forced the stop.
func (s *summary) stoppedBy(sig os.Signal, forced bool) {
	if sig == nil {
		return
	}
	s.Partial, s.Forced = true, forced
	s.Signal, s.status = signalName(sig), signalStatus(sig)
}

// account fills the derived counters from the dispatcher's counts: lost is
// what the accounting invariant misses (received = handled + failed +
// discarded + in flight), plus, for a run that was not stopped, the rows the
// dispatcher never received; replays, received twice, count once.
func (s *summary) account(c counts, replays int64, elapsed time.Duration) {
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
func (s *summary) tally(d *flightdata.Dataset, state func(i int) airport.State, n int) {
	var rows []airportRow
	for i, code := range d.Airports {
		if st := state(i); st.Departures > 0 {
			rows = append(rows, airportRow{Airport: code, State: st})
			s.Violations += st.Violations
		}
	}
	s.Aggregates = len(rows)
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
		return s.status
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
		p("PARTIAL: interrupted by %s and %s after %s of %s; these figures are not a complete run",
			s.Signal, how, thousands(s.Exchanges.Received), count(s.Rows, "flight"))
	}
	destinationsOnly := ""
	switch n := s.AirportsNamed - s.Airports; {
	case n == 1:
		destinationsOnly = " (and 1 airport that is only a destination)"
	case n > 1:
		destinationsOnly = fmt.Sprintf(" (and %s that are only destinations)", count(int64(n), "airport"))
	}
	p("input\t%s: %s from %s%s", s.Input, count(s.Rows, "flight"), count(int64(s.Airports), "airport"), destinationsOnly)
	p("aggregates\t%s handled, one per origin airport (%s)", thousands(int64(s.Aggregates)), airportAggregate)
	p("dispatcher\t%s, %s, handler cost %v", count(int64(s.Parallelism), "group"),
		count(int64(s.Pool), "scheduler goroutine"), s.HandlerCost)
	p("source\t%s", s.sourceLine())
	if b := s.Broker; b != nil {
		p("assignment\t%s", b.assignmentLine())
		for _, m := range b.Members {
			p("member %s\t%s", m.Name, m.line())
		}
	}
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

	fmt.Fprintf(w, "\nbusiest %s\n", count(int64(len(s.Busiest)), "airport"))
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

// sourceLine says how the flights came and, for rxgo, how the outcomes were
// counted.
func (s *summary) sourceLine() string {
	if b := s.Broker; b != nil {
		return fmt.Sprintf("%s (embedded nats-server, %s, published in %.3f s, consumed by %d processes), outcomes from the consumers' Stats, %s",
			s.Source, count(int64(b.Partitions), "partition"), b.Publish.Seconds(), b.Consumers,
			count(b.Acks, "cumulative acknowledgement"))
	}
	rb := s.ReadBack
	if rb == nil {
		return s.Source + " (flux.FromSeq), outcomes from the dispatcher's Stats"
	}
	line := fmt.Sprintf("%s (rxgo.Defer through flux.FromObservable), %s read back through Results.Observable",
		s.Source, count(rb.Read, "outcome"))
	if rb.Dropped > 0 {
		line += fmt.Sprintf(" and %s dropped by the forced stop (counts from Stats)", thousands(rb.Dropped))
	}
	if rb.Agrees {
		return line + ", agreeing with Stats"
	}
	return line + ", DISAGREEING with Stats"
}

// assignmentLine says how the consumer processes shared the partitions,
// and what they received twice.
func (b *brokerSummary) assignmentLine() string {
	twice := fmt.Sprintf("%s skipped, %s dropped", count(b.Replayed, "replay"), count(b.Duplicates, "duplicate"))
	if len(b.Members) == 0 {
		return fmt.Sprintf("%s: each process told its partitions (%s); %s", b.Assignment, strings.Join(consumerOwns, " and "), twice)
	}
	names := make([]string, len(b.Members))
	for i, m := range b.Members {
		names[i] = m.Name
	}
	members := fmt.Sprintf("%s: members %s, leases of %v", b.Assignment, strings.Join(names, " and "), b.LeaseTTL)
	if b.Handoff == 0 { // stopped (a signal, a failure) before the second member held its share
		return fmt.Sprintf("%s; stopped before the handoff: the second never held its share, and only the first half of the flights was published; %s",
			members, twice)
	}
	return fmt.Sprintf("%s; the second started once the first held all %d partitions, and held its share %.3f s later; "+
		"half the flights published before, half after; %s", members, b.Partitions, b.Handoff.Seconds(), twice)
}

// line says what member m held and did.
func (m memberSummary) line() string {
	ps := make([]string, len(m.Partitions))
	for i, p := range m.Partitions {
		ps[i] = strconv.Itoa(int(p))
	}
	held := "no partition"
	if len(ps) > 0 {
		held = "partitions " + strings.Join(ps, ",")
	}
	return fmt.Sprintf("%s at the end; %s, %s (lease bucket); %s applied, %s taken over; %s skipped, %s redelivered, %s dropped",
		held, count(int64(m.Claims), "claim"), count(int64(m.Releases), "release"), count(m.Applied, "flight"),
		count(m.Adopted, "airport state"), count(m.Replayed, "replay"), thousands(m.Redelivered), count(m.Duplicates, "duplicate"))
}

// count says n things: count(1, "flight") is "1 flight", count(3000000,
// "flight") "3,000,000 flights".
func count(n int64, noun string) string {
	if n != 1 {
		noun += "s"
	}
	return thousands(n) + " " + noun
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
