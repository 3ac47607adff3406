package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// In a MainDispatcher, the end of one named aggregate's scheduler (its
// owner disposes it by force, or gracefully) retires that aggregate only:
// its running handler's ctx is cancelled, what its lanes held and whatever
// of it arrives later is discarded with ErrRejected, counted and given to
// the hooks, while the other aggregate goes on from the same source, which
// is not cut; Err reports the retirement once Done closed.
func TestMainSchedulerEndRetiresItsAggregateOnly(t *testing.T) {
	for name, c := range map[string]struct {
		end     func(s schedulers.Scheduler, release chan struct{})
		handled []int // the invoices handled: those of the running batch under a graceful disposal
	}{
		"Dispose": {func(s schedulers.Scheduler, _ chan struct{}) { s.Dispose() }, []int{0}},
		"DisposeGracefully": {func(s schedulers.Scheduler, release chan struct{}) {
			go func() { _ = s.DisposeGracefully(context.Background()) }()
			require.Eventually(t, func() bool { return s.Schedule(func(context.Context) {}) != nil }, 10*time.Second, time.Millisecond)
			close(release) // the running batch goes on; the lane's next turn is refused
		}, []int{0, 1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			sup, _ := countingSupplier(t)
			in := make(chan testkit.Exchange)
			ledger := newBrkLedger()
			var (
				mu      sync.Mutex
				reasons []error
			)
			blocked, release := make(chan struct{}), make(chan struct{})
			h := func(ctx context.Context, x testkit.Exchange) error {
				ledger.handle(x)
				if x.ID.Named == invoices && x.Seq == 0 {
					close(blocked)
					select { // held until its scheduler ends
					case <-ctx.Done():
						return ctx.Err()
					case <-release:
						return nil
					}
				}
				return nil
			}
			m := newMain(t, flux.FromChannel(in), h, sup, dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
				mu.Lock()
				reasons = append(reasons, reason)
				mu.Unlock()
				ledger.discard(x, reason)
			}))
			require.NoError(t, m.Prepare(t.Context()))
			require.NoError(t, m.Start())
			forceOnCleanup(t, m)

			send := func(x testkit.Exchange) {
				t.Helper()
				select {
				case in <- x:
				case <-m.Done():
					t.Fatalf("the source was cut: %v not taken; Err: %v", x, m.Err())
				}
			}
			inv := aggregate.NewID(invoices, "i")
			ord := aggregate.NewID(orders, "o")
			seq := 0
			for ; seq < 3; seq++ { // invoice 0 holds its lane, 1 and 2 wait behind it
				send(testkit.Exchange{ID: inv, Seq: seq})
				send(testkit.Exchange{ID: ord, Seq: seq})
			}
			<-blocked
			s, err := sup.GetOrInitialize(invoices)
			require.NoError(t, err)
			c.end(s, release)
			<-s.Done()
			for ; seq < 50; seq++ {
				send(testkit.Exchange{ID: ord, Seq: seq})
				send(testkit.Exchange{ID: inv, Seq: seq}) // retired: discarded
			}
			require.Equal(t, component.StateRunning, m.State())
			close(in)
			<-m.Done()

			require.ErrorIs(t, m.Err(), schedulers.ErrRejected)
			require.ErrorContains(t, m.Err(), invoices.String())
			st := m.Stats()
			require.NoError(t, ledger.check(st, nil))
			require.Equal(t, int64(100), st.Received)
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			require.Len(t, ledger.handled[ord.ID], 50, "every order handled")
			require.Equal(t, c.handled, ledger.handled[inv.ID], "no invoice handled after its scheduler ended")
			require.Len(t, ledger.discarded[inv.ID], 50-len(c.handled))
			require.Equal(t, int64(50-len(c.handled)), st.Discarded)
			for _, r := range reasons {
				require.True(t, errors.Is(r, schedulers.ErrRejected), "reason %v", r)
			}
		})
	}
}
