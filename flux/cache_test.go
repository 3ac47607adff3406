package flux_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// counting returns f and the number of times it was subscribed.
func counting[T any](f flux.Flux[T]) (flux.Flux[T], *atomic.Int64) {
	var n atomic.Int64
	return flux.Defer(func() flux.Flux[T] { n.Add(1); return f }), &n
}

// Reactor's FluxReplayTest.cacheFlux and FluxCacheTest.cacheFlux in
// virtual time: the first subscriber sees the items as they come, a later
// one at once, and the upstream is subscribed once.
func TestCacheReplaysWithoutResubscribing(t *testing.T) {
	leakFree(t)
	synctest.Test(t, func(t *testing.T) {
		src, subs := counting(flux.Just(1, 2, 3).DelayElements(time.Second))
		cached := flux.Elapsed(src.Replay(8).AutoConnect(1))
		first, err := flux.Collect(t.Context(), cached)
		require.NoError(t, err)
		require.Equal(t, []flux.ElapsedValue[int]{{time.Second, 1}, {time.Second, 2}, {time.Second, 3}}, first)
		second, err := flux.Collect(t.Context(), cached)
		require.NoError(t, err)
		require.Equal(t, []flux.ElapsedValue[int]{{0, 1}, {0, 2}, {0, 3}}, second)
		require.Equal(t, int64(1), subs.Load())
	})
}

// Reactor's cases of replay(n) and cache(n) without time: a late
// subscriber sees only the history (onlyInitialRequestWithLateUnboundedSubscriber,
// cacheFluxHistory), a cached completion (cacheZeroFluxCachesCompletion)
// and a cached error.
func TestCacheHistory(t *testing.T) {
	leakFree(t)
	src, subs := counting(flux.Range(1, 11))
	replay := src.Replay(8).AutoConnect(1)
	testkit.Verify(t, replay).ExpectNext(seqFrom(1, 11)...).ExpectComplete().VerifyT()
	testkit.Verify(t, replay).ExpectNext(seqFrom(4, 8)...).ExpectComplete().VerifyT()
	require.Equal(t, int64(1), subs.Load())

	empty, esubs := counting(flux.Empty[int]())
	cachedEmpty := empty.Cache(1)
	testkit.Verify(t, cachedEmpty).ExpectComplete().VerifyT()
	testkit.Verify(t, cachedEmpty).ExpectComplete().VerifyT()
	require.Equal(t, int64(1), esubs.Load())

	bad, bsubs := counting(failing)
	cachedBad := bad.Cache(3)
	testkit.Verify(t, cachedBad).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, cachedBad).ExpectNext(7, 8, 9).ExpectErrorIs(errBoom).VerifyT()
	require.Equal(t, int64(1), bsubs.Load())

	// A late subscriber that leaves early does not spoil the cache.
	cached := flux.Range(1, 5).Cache(5)
	testkit.Verify(t, cached).ExpectNextCount(5).ExpectComplete().VerifyT()
	testkit.Verify(t, cached.Take(1)).ExpectNext(1).ExpectComplete().VerifyT()
	testkit.Verify(t, cached).ExpectNext(1, 2, 3, 4, 5).ExpectComplete().VerifyT()
}

// While the upstream runs the connection is owned as RefCount's: the last
// subscriber to leave cancels and joins it (goleak would see it left
// running), and the next subscriber connects afresh.
func TestAutoConnectLastSubscriberCancels(t *testing.T) {
	leakFree(t)
	src, subs := counting(endless)
	cached := src.Cache(2)
	testkit.Verify(t, cached.Take(3)).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, cached.Take(3)).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
	require.Equal(t, int64(2), subs.Load())
}

// AutoConnect(n) connects at the n-th subscriber, and the subscribers
// waiting get every item.
func TestAutoConnectAtTheNthSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newUpstream()
		auto := u.flux().Replay(2).AutoConnect(2)
		a := subscribe(t.Context(), auto, false)
		synctest.Wait()
		require.Zero(t, u.subscriptions.Load(), "not before the second subscriber")
		b := subscribe(t.Context(), auto, false)
		synctest.Wait()
		require.Equal(t, int64(1), u.subscriptions.Load())
		u.send(1, 2, 3)
		close(u.in)
		for _, sub := range []*subscriber[int]{a, b} {
			got, err := sub.wait()
			require.NoError(t, err)
			require.Equal(t, []int{1, 2, 3}, got)
		}
		// Kept: a third subscriber replays the history alone.
		got, err := flux.Collect(t.Context(), auto)
		require.NoError(t, err)
		require.Equal(t, []int{2, 3}, got)
		require.Equal(t, int64(1), u.subscriptions.Load())
	})
}

func TestReplayRefCount(t *testing.T) {
	leakFree(t)
	// RefCount over Replay: a new connection after the upstream ended.
	src, subs := counting(flux.Range(1, 3))
	shared := src.Replay(2).RefCount(1)
	testkit.Verify(t, shared).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, shared).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	require.Equal(t, int64(2), subs.Load())
	// Invalid arguments.
	for _, f := range []flux.Flux[int]{
		flux.Just(1).Replay(0).AutoConnect(1),
		flux.Just(1).Replay(0).RefCount(1),
		flux.Just(1).Replay(1).AutoConnect(0),
		flux.Just(1).Publish(0).AutoConnect(1),
		flux.Just(1).Cache(0),
	} {
		testkit.Verify(t, f).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	}
}
