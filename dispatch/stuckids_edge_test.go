package dispatch_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// A graceful stop that times out under stuck handlers names their aggregate
// ids, a few of them with the count of the rest, beside their groups; Run's
// error keeps wrapping ErrShutdownTimeout. In both orderings: by group, and
// by aggregate id (WithKeyOrdering).
func TestGracefulTimeoutNamesTheStuckAggregateIDs(t *testing.T) {
	for name, ordering := range map[string][]dispatch.Option[testkit.Exchange]{
		"groups": nil,
		"keys":   {dispatch.WithKeyOrdering()},
	} {
		t.Run(name, func(t *testing.T) { stuckIDsNamed(t, ordering) })
	}
}

func stuckIDsNamed(t *testing.T, ordering []dispatch.Option[testkit.Exchange]) {
	synctest.Test(t, func(t *testing.T) {
		const groups, stuck = 64, 5
		var ids []string
		seen := map[int]bool{}
		for i := 0; len(ids) < stuck; i++ { // ids in distinct groups, so that each runs
			id := "agg-" + strconv.Itoa(i)
			if g := aggregate.NewID(orders, id).Mod(groups); !seen[g] {
				seen[g] = true
				ids = append(ids, id)
			}
		}
		sched, err := schedulers.NewParallel("stuck", stuck)
		require.NoError(t, err)
		defer func() { sched.Dispose(); <-sched.Done() }()
		running := make(chan struct{}, stuck)
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, func(ctx context.Context, _ testkit.Exchange) error {
			running <- struct{}{}
			<-ctx.Done() // until the force
			return ctx.Err()
		}, append([]dispatch.Option[testkit.Exchange]{quiet, dispatch.WithParallelism(groups),
			dispatch.WithScheduler(sched), dispatch.WithStopTimeout(time.Second)}, ordering...)...)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		synctest.Wait()
		for _, id := range ids {
			require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, id)}))
		}
		for range ids {
			<-running
		}
		cancel()
		err = <-ran
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		named := 0
		for _, id := range ids {
			if strings.Contains(err.Error(), strconv.Quote(id)) {
				named++
			}
		}
		require.Equal(t, 3, named, "a few ids named: %v", err)
		require.ErrorContains(t, err, "and 2 more")
	})
}
