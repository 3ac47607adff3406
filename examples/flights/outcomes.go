package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// resultsBuffer is the room of the dispatcher's Results: how far the
// handlers may run ahead of the reader before they wait for it.
const resultsBuffer = 1024

// readBack is the outcomes of a run as read back from the dispatcher's
// Results through rxgo.
type readBack struct {
	counts  job.Counts // InFlight stays 0: a Result is an exchange that ended
	dropped int64      // Results.Dropped: only a forced stop drops any
	err     error      // an error item, or an item that is not a Result
}

// readOutcomes observes results as an rxgo Observable on a goroutine of its
// own and counts each Result by outcome, from now until the dispatcher's
// end completes the stream. The returned wait joins that goroutine and
// returns the count; call it once the dispatcher is done. The Observable's
// context is cancelled then, which ends the goroutine rxgo keeps for it.
func readOutcomes(results *dispatch.Results[job.Departure]) (wait func() readBack) {
	ctx, cancel := context.WithCancel(context.Background())
	items := results.Observable(ctx).Observe(rxgo.WithBufferedChannel(rxgoBuffer))
	var rb readBack
	var reader sync.WaitGroup
	reader.Go(func() {
		for it := range items {
			if it.Error() {
				rb.err = it.E
				continue
			}
			r, ok := it.V.(dispatch.Result[job.Departure])
			if !ok {
				rb.err = fmt.Errorf("flights: read back an item of type %T, want a dispatch.Result", it.V)
				continue
			}
			add(&rb.counts, r.Outcome)
		}
	})
	return func() readBack {
		reader.Wait()
		cancel()
		rb.dropped = results.Dropped()
		return rb
	}
}

// add counts, in c, one exchange that ended with outcome o.
func add(c *job.Counts, o dispatch.Outcome) {
	c.Received++
	switch o {
	case dispatch.OutcomeSuccess:
		c.Succeeded++
	case dispatch.OutcomeDiscarded:
		c.Discarded++
	default: // error, panic, cancelled
		c.Failed++
	}
}

// reconcile checks rb against the dispatcher's final counts: one Result per
// exchange received, read or dropped, and when none was dropped the same
// count per outcome. The error wraps errDisagree.
func (rb readBack) reconcile(stats job.Counts) error {
	if rb.err != nil {
		return fmt.Errorf("%w: %w", errDisagree, rb.err)
	}
	want := stats
	want.InFlight = 0
	switch {
	case rb.counts.Received+rb.dropped != stats.Received:
		return fmt.Errorf("%w: %d read and %d dropped, %d received", errDisagree, rb.counts.Received, rb.dropped, stats.Received)
	case rb.dropped == 0 && rb.counts != want:
		return fmt.Errorf("%w: read %+v, Stats %+v", errDisagree, rb.counts, want)
	}
	return nil
}

// readBackSummary is what -source rxgo read back through the dispatcher's
// Results: Read outcomes, Dropped ones (a forced stop's), and whether they
// agree with the dispatcher's Stats.
type readBackSummary struct {
	Read    int64 `json:"read"`
	Dropped int64 `json:"dropped"`
	Agrees  bool  `json:"agrees"`
}

// summary is rb for the summary; err is the run's error, which wraps
// errDisagree when the outcomes read back disagree with Stats.
func (rb readBack) summary(err error) *readBackSummary {
	return &readBackSummary{Read: rb.counts.Received, Dropped: rb.dropped, Agrees: !errors.Is(err, errDisagree)}
}

// sourceLine says how the flights of source came and, with rb (-source
// rxgo), how the outcomes were counted.
func sourceLine(source string, rb *readBackSummary) string {
	if rb == nil {
		return source + " (flux.FromSeq), outcomes from the dispatcher's Stats"
	}
	line := fmt.Sprintf("%s (rxgo.Defer through flux.FromObservable), %s read back through Results.Observable",
		source, job.Count(rb.Read, "outcome"))
	if rb.Dropped > 0 {
		line += fmt.Sprintf(" and %s dropped by the forced stop (counts from Stats)", job.Thousands(rb.Dropped))
	}
	if rb.Agrees {
		return line + ", agreeing with Stats"
	}
	return line + ", DISAGREEING with Stats"
}
