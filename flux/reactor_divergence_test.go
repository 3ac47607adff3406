package flux_test

import (
	"context"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// Reactor's cases where flux differed, one test each.

// reactor-core FluxFilterTest (discard): the items filter rejects go to the
// discard hook (Operators.onDiscard), as Distinct's do.
func TestFilterDiscardsRejected(t *testing.T) {
	var dropped []int
	f := flux.DoOnDiscard(flux.Range(1, 6).Filter(func(v int) bool { return v%2 == 0 }), func(v int, reason error) {
		require.ErrorIs(t, reason, flux.ErrFiltered)
		dropped = append(dropped, v)
	})
	testkit.Verify(t, f).ExpectNext(2, 4, 6).ExpectComplete().VerifyT()
	require.Equal(t, []int{1, 3, 5}, dropped)
}

// reactor-core RetryBackoffSpecTest (minBackoff is respected): the jitter of
// Retry.backoff never takes a wait below the minimum backoff, the first
// included: the k-th wait (from 1) is in [max(min, d/2), 1.5*d] with
// d = min*2^(k-1).
func TestRetryBackoffNeverBelowMinimum(t *testing.T) {
	const minBackoff = 100 * time.Millisecond
	spec := flux.RetryBackoff(5, minBackoff)
	for range 200 {
		b := spec.BackOff()
		for k := range 5 {
			d := minBackoff << k
			got := b.NextBackOff()
			require.GreaterOrEqual(t, got, max(minBackoff, d/2), "wait %d", k+1)
			require.LessOrEqual(t, got, d+d/2, "wait %d", k+1)
		}
	}
}

// reactor-semantics §1.9 (c): concatMap over 4 keys, each key's items in a
// run of 85: Reactor completes (its shared prefetch of 256 holds the 3*85
// items of the groups waiting their turn). A run longer than the group
// buffer must not stall a flow that can progress by buffering it.
func TestGroupByConcatMapLongRuns(t *testing.T) {
	const run, keys = 85, 4
	f := flux.ConcatMap(flux.GroupBy(flux.Range(0, run*keys), func(v int) int { return v / run }, keys),
		func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux })
	got, err := flux.Collect(t.Context(), f)
	require.NoError(t, err)
	want, _ := flux.Collect(t.Context(), flux.Range(0, run*keys))
	require.Equal(t, want, got)
}

// reactor-core SinkManyUnicastTest (subscriber cancelled at once): a unicast
// sink whose first subscriber's ctx is already done is cancelled by it, as
// Reactor's is by a subscriber that cancels on subscribe: the buffered items
// go to that subscriber's discard hook and later emissions are refused.
func TestUnicastSinkCancelledByDoneSubscriber(t *testing.T) {
	s, err := flux.NewUnicastSink[int](4)
	require.NoError(t, err)
	require.Equal(t, flux.EmitOK, s.TryEmitNext(1))
	require.Equal(t, flux.EmitOK, s.TryEmitNext(2))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var dropped []int
	f := flux.DoOnDiscard(s.AsFlux(), func(v int, reason error) {
		require.ErrorIs(t, reason, context.Canceled)
		dropped = append(dropped, v)
	})
	require.ErrorIs(t, f.Subscribe(ctx, func(int) error { return nil }), context.Canceled)
	require.Equal(t, []int{1, 2}, dropped)
	require.Equal(t, flux.EmitFailCancelled, s.TryEmitNext(3))
}
