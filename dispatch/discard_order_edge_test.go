package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// A ForceStop from a handler discards what is queued, each discarded
// exchange's hooks on a goroutine of their own: per id they still see the
// exchanges in order, the outcome hook before the discard hook, each once,
// and every exchange is handled or discarded exactly once.
func TestForceStopFromHandlerDiscardsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ids, per = 5, 40
		var mu sync.Mutex
		seen := map[string]string{} // per id: "o" (outcome hook) and "d" (discard hook) as called
		order := map[string][]int{}
		ledger := newBrkLedger()
		var d *dispatch.Dispatcher[testkit.Exchange]
		gate := make(chan struct{})
		var err error
		d, err = dispatch.New[testkit.Exchange]("orders", orders, nil,
			func(ctx context.Context, x testkit.Exchange) error {
				<-gate
				ledger.handle(x)
				if x.ID.ID == itoa(2) && x.Seq == 3 {
					d.ForceStop()
				}
				return nil
			}, quietOf[testkit.Exchange](), dispatch.WithParallelism(3),
			dispatch.WithScheduler(newParallel(t, 2)),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
				if r.Outcome == dispatch.OutcomeDiscarded {
					mu.Lock()
					seen[r.Exchange.ID.ID] += "o"
					order[r.Exchange.ID.ID] = append(order[r.Exchange.ID.ID], r.Exchange.Seq)
					mu.Unlock()
				}
			}),
			dispatch.WithDiscardHook(func(x testkit.Exchange, err error) {
				mu.Lock()
				seen[x.ID.ID] += "d"
				mu.Unlock()
				ledger.discard(x, err)
			}))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		for seq := range per {
			for id := range ids {
				require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, itoa(id)), Seq: seq}))
			}
		}
		close(gate)
		<-d.Done()
		require.NoError(t, ledger.check(d.Stats(), nil))
		require.Positive(t, d.Stats().Discarded, "the force discarded what was queued")
		mu.Lock()
		defer mu.Unlock()
		for id, seqs := range order {
			for i := 1; i < len(seqs); i++ {
				require.Less(t, seqs[i-1], seqs[i], "id %s discarded out of order: %v", id, seqs)
			}
		}
		for id, calls := range seen {
			require.Equal(t, strings.Repeat("od", len(calls)/2), calls, "id %s: the outcome hook, then the discard hook, per exchange", id)
		}
	})
}
