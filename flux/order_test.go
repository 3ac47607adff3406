package flux_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// delayed emits vs, sleeping delays[i] (virtual time) before the i-th.
func delayed(vs []int, delays []time.Duration) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i, v := range vs {
			time.Sleep(delays[i%len(delays)])
			if err := s.Next(v); err != nil {
				return err
			}
		}
		return nil
	})
}

func drawDelays(rt *rapid.T, label string) []time.Duration {
	ms := rapid.SliceOfN(rapid.IntRange(0, 20), 1, 16).Draw(rt, label)
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// ConcatMap keeps the order of the upstream and of each inner whatever the
// delays of the inners, and PublishOn keeps the upstream order whatever the
// delays on either side of it.
func TestOrderProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(rt, "n")
		inner := rapid.IntRange(1, 5).Draw(rt, "inner")
		prefetch := rapid.IntRange(1, 8).Draw(rt, "prefetch")
		upDelays := drawDelays(rt, "upstream delays")
		innerDelays := drawDelays(rt, "inner delays")
		downDelays := drawDelays(rt, "downstream delays")
		var got []int
		var err error
		synctest.Test(t, func(t *testing.T) {
			s, serr := schedulers.NewParallel("order", 3)
			require.NoError(t, serr)
			f := flux.ConcatMap(delayed(seq(n), upDelays).PublishOn(s, prefetch), func(v int) flux.Flux[int] {
				vs := make([]int, inner)
				for i := range vs {
					vs[i] = v*inner + i
				}
				return delayed(vs, innerDelays)
			}).PublishOn(s, prefetch)
			i := 0
			err = f.Subscribe(t.Context(), func(v int) error {
				time.Sleep(downDelays[i%len(downDelays)])
				i++
				got = append(got, v)
				return nil
			})
			require.NoError(t, s.DisposeGracefully(t.Context()))
		})
		require.NoError(rt, err)
		require.Equal(rt, seq(n*inner), append([]int{}, got...))
	})
}

// An upstream error passes PublishOn after the queued items (delayError).
func TestPublishOnErrorAfterItems(t *testing.T) {
	s := newParallel(t, 1)
	testkit.Verify(t, failing.PublishOn(s, 3)).ExpectNext(0, 1, 2, 3, 4, 5, 6, 7, 8, 9).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, failing.PublishOn(schedulers.Immediate(), 3)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, failing.SubscribeOn(s)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Just(1).PublishOn(s, 0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

// A disposed scheduler rejects: the flow fails with schedulers.ErrRejected.
func TestPublishOnRejected(t *testing.T) {
	s, err := schedulers.NewSingle("rejecting")
	require.NoError(t, err)
	s.Dispose()
	<-s.Done()
	testkit.Verify(t, flux.Just(1).PublishOn(s, 1)).ExpectErrorIs(schedulers.ErrRejected).VerifyT()
	testkit.Verify(t, flux.Just(1).SubscribeOn(s)).ExpectErrorIs(schedulers.ErrRejected).VerifyT()
}

// Disposing the scheduler by force while a subscription waits ends it with
// ErrRejected and discards what it had queued.
func TestPublishOnSchedulerDisposedMidway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewSingle("midway")
		require.NoError(t, err)
		var mu sync.Mutex
		var dropped []int
		drop := func(v int, reason error) {
			mu.Lock()
			defer mu.Unlock()
			require.ErrorIs(t, reason, schedulers.ErrRejected)
			dropped = append(dropped, v)
		}
		started := make(chan struct{})
		done := make(chan error, 1)
		var pulled atomic.Int64
		delivered := 0
		go func() {
			done <- flux.DoOnDiscard(counted(10, &pulled).PublishOn(s, 4), drop).Subscribe(t.Context(), func(v int) error {
				delivered++
				if v == 0 {
					close(started)
					time.Sleep(time.Second) // holds the worker
				}
				return nil
			})
		}()
		<-started
		s.Dispose()
		err = <-done
		require.ErrorIs(t, err, schedulers.ErrRejected)
		require.Equal(t, int(pulled.Load()), delivered+len(dropped))
		require.NotEmpty(t, dropped)
	})
}

// A worker that rejects a later drain (its scheduler was disposed while the
// drain was idle) ends the flow with ErrRejected; the item that could not be
// delivered goes to the discard hook.
func TestPublishOnRejectedWhileIdle(t *testing.T) {
	s, err := schedulers.NewSingle("idle")
	require.NoError(t, err)
	var dropped []int
	drop := func(v int, reason error) {
		require.ErrorIs(t, reason, schedulers.ErrRejected)
		dropped = append(dropped, v)
	}
	in, got := make(chan int), make(chan int)
	done := make(chan error, 1)
	go func() {
		done <- flux.DoOnDiscard(flux.FromChannel(in).PublishOn(s, 4), drop).Subscribe(t.Context(), func(v int) error { got <- v; return nil })
	}()
	in <- 1
	require.Equal(t, 1, <-got)
	s.Dispose()
	<-s.Done()
	// The drain may still be finishing item 1 when the disposal cancels its
	// task context; then the flow ends before item 2 is taken.
	select {
	case in <- 2:
		require.ErrorIs(t, <-done, schedulers.ErrRejected)
		require.Equal(t, []int{2}, dropped)
	case err := <-done:
		require.ErrorIs(t, err, schedulers.ErrRejected)
		require.Empty(t, dropped)
	}
}
