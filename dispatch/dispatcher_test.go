package dispatch_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

var (
	orders = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}
	quiet  = dispatch.WithLogger(slog.New(slog.DiscardHandler))
)

// exchanges returns n exchanges over ids aggregate ids, round robin, with
// per-id sequence numbers.
func exchanges(n, ids int) []testkit.Exchange {
	xs := make([]testkit.Exchange, n)
	seq := make([]int, ids)
	for i := range xs {
		k := i % ids
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "id-"+itoa(k)), Seq: seq[k]}
		seq[k]++
	}
	return xs
}

func itoa(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) }

// newParallel returns a scheduler disposed at the end of the test.
func newParallel(t *testing.T, n int) schedulers.Scheduler {
	t.Helper()
	s, err := schedulers.NewParallel("test", n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.DisposeGracefully(context.Background())) })
	return s
}

func TestDispatcherHandlesEverything(t *testing.T) {
	const p = 8
	xs := exchanges(1000, 50)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) }, testkit.Perform)
	d, err := dispatch.New("orders", orders, flux.FromSlice(xs), rec.Handle,
		dispatch.WithParallelism(p), dispatch.WithScheduler(newParallel(t, 4)), quiet)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	<-d.Done()
	require.NoError(t, d.Err())
	assert.Equal(t, dispatch.StateStopped, d.State())
	calls := rec.Calls()
	assert.NoError(t, testkit.PerKeyFIFO(calls))
	assert.NoError(t, testkit.GroupSerial(calls))
	assert.NoError(t, testkit.NoLoss(d.Stats(), calls))
	assert.Equal(t, dispatch.Stats{Received: 1000, Succeeded: 1000}, d.Stats())
}
