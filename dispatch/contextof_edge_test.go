package dispatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

var edgeContextOfNamed = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Ledger"}

// nilCtxObserver counts the calls that got a nil ctx.
type nilCtxObserver struct{ nils atomic.Int64 }

func (o *nilCtxObserver) see(ctx context.Context) {
	if ctx == nil {
		o.nils.Add(1)
	}
}
func (o *nilCtxObserver) Admitted(ctx context.Context, _ dispatch.Labels) { o.see(ctx) }
func (o *nilCtxObserver) Started(ctx context.Context, _ dispatch.Labels, _ time.Duration) {
	o.see(ctx)
}
func (o *nilCtxObserver) Finished(ctx context.Context, _ dispatch.Labels, _ dispatch.Outcome, _ time.Duration, _ error) {
	o.see(ctx)
}
func (o *nilCtxObserver) Discarded(ctx context.Context, _ dispatch.Labels, _ error) { o.see(ctx) }

// A WithContextOf function that returns nil breaks its own promise; the
// exchange must fail alone (as a panic of that function), its handler must
// not run with a nil ctx, and its Result must reach the Results reader like
// every other: read + Dropped == Received. It used to pass nil on to the
// handler, the Observer and the outcome hooks, where the Results hook
// panicked on it and lost the Result without counting it.
func TestContextOfReturningNilFailsTheExchangeAlone(t *testing.T) {
	r, err := dispatch.NewResults[int](0)
	require.NoError(t, err)
	obs := &nilCtxObserver{}
	var nilHandled atomic.Int64
	d, err := dispatch.NewKeyed("ledger", edgeContextOfNamed, flux.FromSlice([]int{1, 2, 3, 4}),
		func(int) int { return 0 },
		func(ctx context.Context, x int) error {
			if ctx == nil {
				nilHandled.Add(1)
			}
			return nil
		},
		quietOf[int](), dispatch.WithParallelism(1), dispatch.WithResults(r), dispatch.WithObserver(obs),
		dispatch.WithContextOf(func(ctx context.Context, x int) context.Context {
			if x == 2 {
				return nil // the misuse under test
			}
			return ctx
		}))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	var got []dispatch.Result[int]
	for res, err := range r.All(t.Context()) {
		require.NoError(t, err)
		got = append(got, res)
	}
	<-d.Done()
	require.Zero(t, nilHandled.Load(), "no handler call with a nil ctx")
	require.Zero(t, obs.nils.Load(), "no Observer call with a nil ctx")
	require.Zero(t, r.Dropped())
	require.Len(t, got, 4, "one Result per exchange")
	require.Equal(t, []int{1, 2, 3, 4}, []int{got[0].Exchange, got[1].Exchange, got[2].Exchange, got[3].Exchange})
	require.Equal(t, dispatch.OutcomePanic, got[1].Outcome)
	var pe *dispatch.PanicError
	require.True(t, errors.As(got[1].Err, &pe), "%v", got[1].Err)
	require.ErrorContains(t, got[1].Err, "nil context")
	require.Equal(t, dispatch.Stats{Received: 4, Succeeded: 3, Failed: 1}, d.Stats())
}
