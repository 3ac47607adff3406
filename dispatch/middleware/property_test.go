package middleware_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// Over random failure counts per exchange, groups, goroutines, waits and
// handling times, a retrying handler on a dispatcher keeps the model: per
// key, the final successes are seq 0, 1, 2... in emission order, each
// exchange makes exactly its failures + 1 attempts, and every attempt of a
// key starts after the attempts of its earlier exchanges.
func TestPropertyRetryKeepsPerKeyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.IntRange(1, 4).Draw(t, "keys")
		n := rapid.IntRange(1, 24).Draw(t, "exchanges")
		ids := make([]string, n)
		fails := make([]int, n)
		for i := range n {
			ids[i] = fmt.Sprintf("id-%d", rapid.IntRange(0, keys-1).Draw(t, "key"))
			fails[i] = rapid.IntRange(0, 3).Draw(t, "fails")
		}
		groups := rapid.IntRange(1, 4).Draw(t, "groups")
		pool := rapid.IntRange(1, 3).Draw(t, "goroutines")
		wait := time.Duration(rapid.IntRange(0, 50).Draw(t, "backoff ms")) * time.Millisecond
		work := time.Duration(rapid.IntRange(0, 3).Draw(t, "handling ms")) * time.Millisecond
		xs := jobs(ids, fails)

		rapid.SyncTest(t, func(t *rapid.T) {
			f := newFlaky()
			inner := testkit.NewRecorder(tagOf(groups), func(ctx context.Context, j job) error {
				time.Sleep(work) // the handler's own time, virtual
				return f.handle(ctx, j)
			})
			policy := middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(wait) })
			outer := testkit.NewRecorder(tagOf(groups), retry(t, policy)(inner.Handle))
			sched, err := schedulers.NewParallel("retry-property", pool)
			require.NoError(t, err)
			d := start(t, xs, outer.Handle, groups, dispatch.WithScheduler(sched))
			<-d.Done()
			require.NoError(t, sched.DisposeGracefully(context.Background()))

			require.Equal(t, dispatch.Stats{Received: int64(n), Succeeded: int64(n)}, d.Stats())
			require.Equal(t, modelOrder(xs), successOrder(outer.Calls()), "per key, successes in emission order")
			require.NoError(t, testkit.NoLoss(int64(n), d.Stats(), outer.Calls()))
			require.NoError(t, testkit.GroupSerial(outer.Calls()))
			require.NoError(t, attemptsInOrder(inner.Calls(), wantAttempts(xs)))
			require.NoError(t, testkit.GroupSerial(inner.Calls()), "no attempt overlaps another of its group")
		})
	})
}

// modelOrder is the model: per key, the seqs of its exchanges in emission
// order.
func modelOrder(xs []job) map[string][]int {
	m := map[string][]int{}
	for _, x := range xs {
		m[x.id.ID] = append(m[x.id.ID], x.seq)
	}
	return m
}

// successOrder returns, per key, the seqs of the successful calls in the
// order they started.
func successOrder(calls []testkit.Call) map[string][]int {
	slices.SortFunc(calls, func(a, b testkit.Call) int { return cmp.Compare(a.Start, b.Start) })
	m := map[string][]int{}
	for _, c := range calls {
		if c.Outcome == dispatch.OutcomeSuccess {
			m[c.Key] = append(m[c.Key], c.Seq)
		}
	}
	return m
}
