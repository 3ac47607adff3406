package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// reasonLog records the discard hook's reasons beside an edgeLedger.
type reasonLog struct {
	mu      sync.Mutex
	reasons []error
}

func (r *reasonLog) hook(l *edgeLedger) func(testkit.Exchange, error) {
	return func(x testkit.Exchange, reason error) {
		r.mu.Lock()
		r.reasons = append(r.reasons, reason)
		r.mu.Unlock()
		l.discard(x, reason)
	}
}

// heldFirst is a handler that records every exchange in l and holds the
// first one (Seq 0) until release closes.
func heldFirst(l *edgeLedger, release <-chan struct{}) dispatch.Handler[testkit.Exchange] {
	return func(ctx context.Context, x testkit.Exchange) error {
		l.handle(x)
		if x.Seq == 0 {
			<-release
		}
		return nil
	}
}

// A graceful stop that comes while the source holds an item it took from
// the user's channel (here waiting for room in the pending budget) hands
// that item on: it is handled, not discarded; what is still in the channel
// stays there.
func TestGracefulStopHandsOnTheItemTakenFromTheChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(3, 1)
		in := make(chan testkit.Exchange, len(xs))
		for _, x := range xs {
			in <- x
		}
		ledger, release := newBrkLedger(), make(chan struct{})
		d := started(t, flux.FromChannel(in), heldFirst(ledger, release),
			dispatch.WithMaxPending(1), dispatch.WithDiscardHook(ledger.discard))
		synctest.Wait() // 0 in its handler, 1 taken and waiting for the budget, 2 in the channel
		require.Len(t, in, 1)

		stopped := make(chan error, 1)
		go func() { stopped <- d.StopGracefully(t.Context()) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-stopped)

		require.NoError(t, ledger.check(d.Stats(), nil))
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
		require.Equal(t, []int{0, 1}, ledger.handled[xs[0].ID.ID], "the item taken is handed on")
		require.Len(t, in, 1, "the item left in the channel is not taken")
	})
}

// What an operator of a flux source drops because the intake closed (the
// queue of a PublishOn between the channel and the dispatcher) is counted
// and discarded with ErrStopped, given to the discard hook, as an exchange
// a source emits after the intake closed is.
func TestFluxSourceDropsAfterTheIntakeClosedAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(5, 1)
		in := make(chan testkit.Exchange, len(xs))
		for _, x := range xs {
			in <- x
		}
		close(in)
		pub, err := schedulers.NewParallel("publish", 1)
		require.NoError(t, err)
		defer func() { pub.Dispose(); <-pub.Done() }()
		ledger, release, reasons := newBrkLedger(), make(chan struct{}), &reasonLog{}
		d := started(t, flux.FromChannel(in).PublishOn(pub, 4), heldFirst(ledger, release),
			dispatch.WithMaxPending(1), dispatch.WithDiscardHook(reasons.hook(ledger)))
		synctest.Wait() // 0 in its handler, 1 waiting for the budget, the rest in PublishOn's queue

		stopped := make(chan error, 1)
		go func() { stopped <- d.StopGracefully(t.Context()) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-stopped)

		st := d.Stats()
		require.NoError(t, ledger.check(st, nil))
		require.Equal(t, int64(len(xs)), st.Received, "every item the source took is counted: %+v", st)
		ledger.mu.Lock()
		got := len(ledger.handled[xs[0].ID.ID]) + len(ledger.discarded[xs[0].ID.ID])
		ledger.mu.Unlock()
		require.Equal(t, len(xs), got, "each handled or discarded")
		require.NotEmpty(t, reasons.reasons)
		for _, r := range reasons.reasons {
			require.True(t, errors.Is(r, dispatch.ErrStopped), "reason %v", r)
		}
	})
}
