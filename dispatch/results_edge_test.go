package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// edgeResultsOf starts a dispatcher of n exchanges in one group whose
// Results, with room for buffer, it returns.
func edgeResultsOf(t *testing.T, n, buffer int) (*dispatch.Dispatcher[int], *dispatch.Results[int]) {
	t.Helper()
	r, err := dispatch.NewResults[int](buffer)
	require.NoError(t, err)
	d, err := dispatch.NewKeyed("ledger", edgeContextOfNamed, flux.FromSlice(make([]int, n)),
		func(int) int { return 0 }, func(context.Context, int) error { return nil },
		quietOf[int](), dispatch.WithParallelism(1), dispatch.WithResults(r))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	return d, r
}

// An rxgo observer that stops reading, then cancels its ctx: the Result the
// Observable was handing over when it stopped never reached the observer,
// so it is one of the Dropped. It used to be lost from the count (read +
// Dropped one short of Received): the stream's Flux counts only what its
// downstream reports undelivered, and the rxgo bridge reported its ctx's
// cause instead.
func TestResultsObservableStoppedReaderCountsTheResultInHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r := edgeResultsOf(t, 20, 2)
		ctx, cancel := context.WithCancel(t.Context())
		items := r.Observable(ctx).Observe()
		read := 0
		for range 3 {
			it := <-items
			require.False(t, it.Error())
			read++
		}
		synctest.Wait() // the Observable holds the next Result, the observer reads no more
		cancel()
		for range items { // rxgo closes the channel once its producer returned
		}
		d.ForceStop()
		<-d.Done()
		require.Equal(t, d.Stats().Received, int64(read)+r.Dropped(), "read %d, dropped %d", read, r.Dropped())
	})
}

// Whenever a reader's ctx ends, concurrently with the Results it is being
// handed, read + Dropped == Received. All used to lose one Result now and
// then (once in a few hundred runs): the one its hand-over goroutine held
// when the ctx ended, which it reported as the ctx's cause, not as
// undelivered.
func TestResultsAllCancelledConcurrentlyCountsExactly(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		buffer := rapid.IntRange(0, 8).Draw(rt, "buffer")
		cancelAt := rapid.IntRange(1, 40).Draw(rt, "cancelAt")
		d, r := edgeResultsOf(t, n, buffer)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		read := 0
		for _, err := range r.All(ctx) {
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
				break
			}
			if read++; read == cancelAt {
				go cancel() // races with the next hand-over
			}
		}
		d.ForceStop()
		<-d.Done()
		require.Equal(t, d.Stats().Received, int64(read)+r.Dropped(), "read %d, dropped %d", read, r.Dropped())
	})
}
