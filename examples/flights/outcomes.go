package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/dispatch"
)

// resultsBuffer is the room of the dispatcher's Results: how far the
// handlers may run ahead of the reader before they wait for it.
const resultsBuffer = 1024

// readBack is the outcomes of a run as read back from the dispatcher's
// Results through rxgo.
type readBack struct {
	counts  counts // InFlight stays 0: a Result is an exchange that ended
	dropped int64  // Results.Dropped: only a forced stop drops any
	err     error  // an error item, or an item that is not a Result
}

// readOutcomes observes results as an rxgo Observable on a goroutine of its
// own and counts each Result by outcome, from now until the dispatcher's
// end completes the stream. The returned wait joins that goroutine and
// returns the count; call it once the dispatcher is done. The Observable's
// context is cancelled then, which ends the goroutine rxgo keeps for it.
func readOutcomes(results *dispatch.Results[departure]) (wait func() readBack) {
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
			r, ok := it.V.(dispatch.Result[departure])
			if !ok {
				rb.err = fmt.Errorf("flights: read back an item of type %T, want a dispatch.Result", it.V)
				continue
			}
			rb.counts.add(r.Outcome)
		}
	})
	return func() readBack {
		reader.Wait()
		cancel()
		rb.dropped = results.Dropped()
		return rb
	}
}

// add counts one exchange that ended with outcome o.
func (c *counts) add(o dispatch.Outcome) {
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
func (rb readBack) reconcile(stats counts) error {
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
