package dispatch_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// hookTrail records, per exchange, which hooks were called, in order.
type hookTrail struct {
	mu    sync.Mutex
	calls map[int][]string
}

func (h *hookTrail) add(x int, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[int][]string{}
	}
	h.calls[x] = append(h.calls[x], name)
}

// One chain of hooks with a panicking one and a Goexiting one among them,
// after an Observer that Goexits too, for handled exchanges (success, error,
// a handler's panic, a handler's Goexit) and dropped ones: every hook is
// called once per exchange, in order, and the dispatcher accounts for every
// exchange and reaches Done.
func TestHookChainWithPanicAndGoexitCallsEachHookOnceInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trail hookTrail
		var dropped sync.Map
		const n = 40
		xs := make([]int, n)
		for i := range xs {
			xs[i] = i
		}
		d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return i % 4 }, func(ctx context.Context, i int) error {
			switch {
			case i >= 20:
				<-ctx.Done() // the rest queued behind, dropped by the force
				return ctx.Err()
			case i%4 == 1:
				return errors.New("refused")
			case i%4 == 2:
				panic("handler")
			case i%4 == 3:
				runtime.Goexit()
			}
			return nil
		},
			dispatch.WithParallelism(4),
			dispatch.WithObserver(goexitOnFinished{&countingObserver{}}),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) { trail.add(r.Exchange, "o1"); panic("o1") }),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) { trail.add(r.Exchange, "o2"); runtime.Goexit() }),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[int]) {
				trail.add(r.Exchange, "o3")
				if r.Outcome == dispatch.OutcomeDiscarded {
					dropped.Store(r.Exchange, true)
				}
			}),
			dispatch.WithDiscardHook(func(x int, _ error) { trail.add(x, "d1"); runtime.Goexit() }),
			dispatch.WithDiscardHook(func(x int, _ error) { trail.add(x, "d2"); panic("d2") }),
			dispatch.WithDiscardHook(func(x int, reason error) {
				assert.ErrorIs(t, reason, dispatch.ErrForceStopped)
				trail.add(x, "d3")
			}),
		)
		synctest.Wait() // the lanes' heads from 20 on blocked, the rest queued
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		require.Equal(t, int64(n), s.Received)
		assert.Zero(t, s.InFlight)
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.Positive(t, s.Discarded)
		var ndropped int64
		dropped.Range(func(any, any) bool { ndropped++; return true })
		assert.Equal(t, s.Discarded, ndropped)
		trail.mu.Lock()
		defer trail.mu.Unlock()
		for i := range n {
			want := []string{"o1", "o2", "o3"}
			if _, ok := dropped.Load(i); ok {
				want = append(want, "d1", "d2", "d3")
			}
			assert.Equal(t, want, trail.calls[i], "exchange %d", i)
		}
	})
}
