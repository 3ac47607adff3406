package schedulers_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
)

// Tasks scheduled one at a time, at varying delays after the goroutines went
// idle (while they spin on the push count, as they park, once parked), by
// direct Schedule and through workers: every task runs, none is left queued
// with every goroutine parked. A lost wake-up hangs a round, which the
// deadline turns into a failure.
func TestNoLostWakeUpAroundSpin(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		s, err := schedulers.NewParallel("edge", n)
		require.NoError(t, err)
		w, err := s.NewWorker()
		require.NoError(t, err)
		ran := make(chan struct{}, 2)
		task := func(context.Context) { ran <- struct{}{} }
		for round := range 3000 {
			for range round % 24 { // from no delay to beyond the spins
				runtime.Gosched()
			}
			var wg sync.WaitGroup
			wg.Go(func() { require.NoError(t, s.Schedule(task)) })
			wg.Go(func() { require.NoError(t, w.Schedule(task)) })
			wg.Wait()
			for range 2 {
				select {
				case <-ran:
				case <-time.After(10 * time.Second):
					t.Fatalf("n=%d round %d: a scheduled task did not run", n, round)
				}
			}
		}
		require.NoError(t, s.DisposeGracefully(t.Context()))
	}
}

// Disposal while the goroutines spin: every goroutine exits and Done closes.
func TestDisposeDuringSpin(t *testing.T) {
	for range 200 {
		s, err := schedulers.NewParallel("edge", 4)
		require.NoError(t, err)
		ran := make(chan struct{}, 4)
		for range 4 {
			require.NoError(t, s.Schedule(func(context.Context) { ran <- struct{}{} }))
		}
		for range 4 {
			<-ran
		}
		s.Dispose()
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed after Dispose during the spin")
		}
	}
}
