package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// TestCountsAdd: success, discarded, and the three failures.
func TestCountsAdd(t *testing.T) {
	var c job.Counts
	for _, o := range []dispatch.Outcome{dispatch.OutcomeSuccess, dispatch.OutcomeError, dispatch.OutcomePanic,
		dispatch.OutcomeCancelled, dispatch.OutcomeDiscarded, dispatch.OutcomeSuccess} {
		add(&c, o)
	}
	assert.Equal(t, job.Counts{Received: 6, Succeeded: 2, Failed: 3, Discarded: 1}, c)
}

// TestReconcile, against a model: the dispatcher ends a random sequence of
// exchanges and the reader reads all but a few (dropped) of their Results.
// The counts agree when nothing was dropped; with drops, only the totals
// are checked. Any count of the Stats off by one, or an error item read,
// is a disagreement.
func TestReconcile(t *testing.T) {
	outcome := rapid.SampledFrom([]dispatch.Outcome{dispatch.OutcomeSuccess, dispatch.OutcomeError,
		dispatch.OutcomePanic, dispatch.OutcomeCancelled, dispatch.OutcomeDiscarded})
	rapid.Check(t, func(t *rapid.T) {
		ended := rapid.SliceOf(outcome).Draw(t, "ended")
		dropped := rapid.IntRange(0, len(ended)).Draw(t, "dropped")
		var stats, read job.Counts
		for i, o := range ended {
			add(&stats, o)
			if i >= dropped {
				add(&read, o)
			}
		}
		rb := readBack{counts: read, dropped: int64(dropped)}
		require.NoError(t, rb.reconcile(stats))

		off := stats
		switch rapid.IntRange(0, 3).Draw(t, "off") {
		case 0:
			off.Received++
		case 1:
			off.Succeeded++
		case 2:
			off.Failed++
		case 3:
			off.Discarded++
		}
		if err := rb.reconcile(off); dropped == 0 || off.Received != stats.Received {
			require.ErrorIs(t, err, errDisagree, "%+v against %+v", rb, off)
		} else {
			require.NoError(t, err, "with drops the per-outcome counts are not compared")
		}

		rb.err = errors.New("boom")
		require.ErrorIs(t, rb.reconcile(stats), errDisagree)
	})
}

// TestSourceLine: the summary's source line says where the counts come
// from, and a disagreement loudly.
func TestSourceLine(t *testing.T) {
	assert.Equal(t, "flux (flux.FromSeq), outcomes from the dispatcher's Stats", sourceLine("flux", nil))
	rb := readBack{counts: job.Counts{Received: 1}}.summary(nil)
	assert.Equal(t, "rxgo (rxgo.Defer through flux.FromObservable), 1 outcome read back through Results.Observable, agreeing with Stats", sourceLine("rxgo", rb))
	rb = readBack{counts: job.Counts{Received: 3}, dropped: 1}.summary(fmt.Errorf("%w: and more", errDisagree))
	assert.Equal(t, "rxgo (rxgo.Defer through flux.FromObservable), 3 outcomes read back through Results.Observable"+
		" and 1 dropped by the forced stop (counts from Stats), DISAGREEING with Stats", sourceLine("rxgo", rb))
}
