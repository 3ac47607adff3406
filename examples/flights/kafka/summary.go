package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// summary is what the job reports.
type summary struct {
	Input                          string
	Rows                           int64
	Airports, Partitions           int
	Brokers                        string
	Members                        []string
	Decode, Produce, Consume       time.Duration
	Handled, Failed, Dropped, Lost int64
	Redelivered, Violations        int64
	Split                          []string // airports folded by two members
	Difference                     string
}

// check merges the members' states and compares them with the sequential
// fold.
func (s *summary) check(data *flightdata.Dataset, res scaled) {
	s.Brokers, s.Produce, s.Consume = res.brokers, res.produce, res.consume
	states := make([]airport.State, len(data.Airports))
	folded := make([]string, len(data.Airports))
	for _, r := range res.reports {
		s.Members = append(s.Members, fmt.Sprintf("%s handled %d, partitions %v", r.Name, r.Handled, r.Partitions))
		s.Handled += r.Handled
		s.Failed += r.Failed
		s.Dropped += r.Discarded
		s.Redelivered += r.Redelivered
		for i, st := range r.States {
			if folded[i] != "" {
				s.Split = append(s.Split, data.Airports[i])
			}
			folded[i] = r.Name
			states[i] = st
			s.Violations += st.Violations
		}
	}
	s.Lost = max(0, s.Rows-s.Handled)
	s.Difference = airport.Diff(data.Airports, airport.Fold(data), func(i int) airport.State { return states[i] })
}

func (s *summary) verified() bool {
	return s.Lost == 0 && s.Violations == 0 && s.Failed == 0 && s.Dropped == 0 && s.Handled == s.Rows &&
		len(s.Split) == 0 && s.Difference == ""
}

func (s *summary) exitCode() int {
	if s.verified() {
		return exitOK
	}
	return exitFailed
}

func (s *summary) write(w io.Writer) {
	perSecond := float64(s.Handled) / max(s.Consume.Seconds(), 1e-9)
	fmt.Fprintf(w, "input       %s: %d flights from %d airports\n", s.Input, s.Rows, s.Airports)
	fmt.Fprintf(w, "kafka       %s, %d partitions keyed by origin airport\n", s.Brokers, s.Partitions)
	for _, m := range s.Members {
		fmt.Fprintf(w, "member      %s\n", m)
	}
	fmt.Fprintf(w, "decode      %.3f s\n", s.Decode.Seconds())
	fmt.Fprintf(w, "produce     %.3f s\n", s.Produce.Seconds())
	fmt.Fprintf(w, "consume     %.3f s  %.0f exchanges/s (from the first record produced to the last commit)\n", s.Consume.Seconds(), perSecond)
	fmt.Fprintf(w, "exchanges   produced %d, handled %d, failed %d, dropped %d, redelivered %d\n", s.Rows, s.Handled, s.Failed, s.Dropped, s.Redelivered)
	fmt.Fprintf(w, "lost        %d\n", s.Lost)
	fmt.Fprintf(w, "violations  %d\n", s.Violations)
	switch {
	case len(s.Split) > 0:
		fmt.Fprintf(w, "\nnot verified: airports folded by two members: %s\n", strings.Join(s.Split, " "))
	case s.Difference != "":
		fmt.Fprintf(w, "\nnot verified: %s\n", s.Difference)
	case !s.verified():
		fmt.Fprintln(w, "\nnot verified")
	default:
		fmt.Fprintln(w, "\nverified")
	}
}
