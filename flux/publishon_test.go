package flux_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
)

// occupied returns a one-goroutine scheduler whose goroutine is held by a
// task until the scheduler is disposed, so that tasks scheduled on it stay
// queued. Call it inside a bubble.
func occupied(t *testing.T) schedulers.Scheduler {
	s, err := schedulers.NewParallel(t.Name(), 1)
	require.NoError(t, err)
	started := make(chan struct{})
	require.NoError(t, s.Schedule(func(ctx context.Context) { close(started); <-ctx.Done() }))
	<-started
	return s
}

// Disposing the scheduler drops PublishOn's queued drain task; an upstream
// waiting for room in the full queue learns of it, the queue and the item it
// held are discarded, and the flow fails with ErrRejected.
func TestPublishOnDisposedWhileUpstreamWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := occupied(t)
		var discarded []int
		drop := func(v int, err error) {
			require.ErrorIs(t, err, schedulers.ErrRejected)
			discarded = append(discarded, v)
		}
		type result struct {
			got []int
			err error
		}
		res := make(chan result, 1)
		go func() {
			got, err := flux.Collect(context.Background(), flux.DoOnDiscard(flux.Range(0, 100).PublishOn(s, 2), drop))
			res <- result{got, err}
		}()
		synctest.Wait() // 0 and 1 queued, the drain task queued, 2 waits for room
		s.Dispose()
		<-s.Done()
		r := <-res
		require.ErrorIs(t, r.err, schedulers.ErrRejected)
		require.Empty(t, r.got)
		require.Equal(t, []int{0, 1, 2}, discarded)
	})
}

// The same with PublishOn fused with a group of GroupBy: the router waits
// for room in the group's queue.
func TestPublishOnFusedDisposedWhileRouterWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := occupied(t)
		res := make(chan error, 1)
		go func() {
			_, err := flux.Collect(context.Background(), flux.FlatMap(
				flux.GroupBy(flux.Range(0, 100), func(int) int { return 0 }, 1, flux.WithGroupBuffer(2)),
				func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.PublishOn(s, 2) }, 1))
			res <- err
		}()
		synctest.Wait()
		s.Dispose()
		<-s.Done()
		require.ErrorIs(t, <-res, schedulers.ErrRejected)
	})
}

// A downstream that calls runtime.Goexit (t.FailNow in a handler) inside the
// drain task ends the subscription with a *PanicError wrapping
// schedulers.ErrGoexit; the scheduler carries on.
func TestPublishOnDownstreamGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hooked := make(chan *schedulers.PanicError, 1)
		s, err := schedulers.NewParallel(t.Name(), 1, schedulers.WithPanicHook(func(p *schedulers.PanicError) { hooked <- p }))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.DisposeGracefully(t.Context())) }()
		var got []int
		err = flux.Range(0, 10).PublishOn(s, 4).Subscribe(t.Context(), func(v int) error {
			if v == 2 {
				runtime.Goexit()
			}
			got = append(got, v)
			return nil
		})
		require.ErrorIs(t, err, schedulers.ErrGoexit)
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, []int{0, 1}, got)
		require.ErrorIs(t, <-hooked, schedulers.ErrGoexit)
		_, err = flux.Collect(t.Context(), flux.Range(0, 3).PublishOn(s, 1))
		require.NoError(t, err, "the scheduler survives the Goexit")
	})
}

// The same for SubscribeOn: a runtime.Goexit inside its task ends the flow.
func TestSubscribeOnGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel(t.Name(), 1, schedulers.WithPanicHook(func(*schedulers.PanicError) {}))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.DisposeGracefully(t.Context())) }()
		err = flux.Range(0, 10).SubscribeOn(s).Subscribe(t.Context(), func(v int) error {
			if v == 2 {
				runtime.Goexit()
			}
			return nil
		})
		require.ErrorIs(t, err, schedulers.ErrGoexit)
	})
}

// A group whose PublishOn cannot get a worker (its scheduler is already
// disposed) is abandoned: the items GroupBy queued for it go to the discard
// hook, even when the upstream has completed and GroupBy has returned.
func TestPublishOnFusedRejectedAtSubscribeDiscardsTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel(t.Name(), 1)
		require.NoError(t, err)
		s.Dispose()
		var mu sync.Mutex
		var discarded []int
		var reasons []error
		drop := func(v int, reason error) {
			mu.Lock()
			defer mu.Unlock()
			discarded, reasons = append(discarded, v), append(reasons, reason)
		}
		completed := make(chan struct{})
		src := flux.Range(0, 3).DoOnComplete(func() { close(completed) })
		_, err = flux.Collect(t.Context(), flux.DoOnDiscard(flux.FlatMap(
			flux.GroupBy(src, func(int) int { return 0 }, 1, flux.WithGroupBuffer(8)),
			func(g flux.GroupedFlux[int]) flux.Flux[int] {
				return flux.Defer(func() flux.Flux[int] {
					<-completed // subscribe once the upstream completed
					return g.PublishOn(s, 8)
				})
			}, 1), drop))
		require.ErrorIs(t, err, schedulers.ErrRejected)
		require.ElementsMatch(t, []int{0, 1, 2}, discarded, "every pulled item is discarded")
		for _, r := range reasons {
			require.ErrorIs(t, r, schedulers.ErrRejected)
		}
	})
}
