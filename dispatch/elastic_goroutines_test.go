package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// A dispatcher of G groups on a bounded elastic scheduler of cap C runs at
// most min(G, C) handlers at once, so it does not make the scheduler start
// more goroutines than that: a goroutine that just ran a lane and looks for
// another, or one woken for a lane, takes the next lane made ready rather
// than a new goroutine. Before, 142 to 189 goroutines for 128 groups.
func TestBoundedElasticStartsNoMoreGoroutinesThanGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups, limit, n = 128, 256, 20_000
		sched, err := schedulers.NewBoundedElastic("io", limit)
		require.NoError(t, err)
		xs := make([]smallExchange, n)
		for i := range xs {
			xs[i] = smallExchange{seq: i}
		}
		var mu sync.Mutex
		peak := 0
		d := startedKeyed(t, flux.FromSlice(xs), func(x smallExchange) int { return x.seq % groups },
			func(context.Context, smallExchange) error {
				mu.Lock()
				peak = max(peak, sched.Goroutines())
				mu.Unlock()
				time.Sleep(50 * time.Microsecond) // a blocking handler
				return nil
			}, dispatch.WithParallelism(groups), dispatch.WithScheduler(sched))
		<-d.Done()
		require.NoError(t, d.Err())
		assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
		// The slack is for a goroutine finishing a lane's turn (leaving it)
		// while another takes the lane's next turn, kicked meanwhile.
		const slack = groups / 16
		assert.LessOrEqual(t, peak, groups+slack, "goroutines of the scheduler while handlers ran")
		assert.LessOrEqual(t, sched.Goroutines(), groups+slack, "goroutines of the scheduler after")
		t.Logf("peak %d goroutines for %d groups at cap %d", peak, groups, limit)
		require.NoError(t, sched.DisposeGracefully(context.Background()))
	})
}
