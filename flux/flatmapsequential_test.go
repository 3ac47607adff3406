package flux_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// late emits v and v*10 after d, counting the inners running at once.
func late(v int, d time.Duration, running, peak *atomic.Int64) flux.Flux[int] {
	return flux.Defer(func() flux.Flux[int] {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return flux.ConcatMap(flux.Timer(d), func(int) flux.Flux[int] { return flux.Just(v, v*10) }).
			DoFinally(func(flux.Signal) { running.Add(-1) })
	})
}

// reactor-core FluxMergeSequentialTest / FluxFlatMapSequentialTest cases.
func TestFlatMapSequential(t *testing.T) {
	leakFree(t)
	pair := func(v int) flux.Flux[int] { return flux.Range(v, 2) }
	// normal
	testkit.Verify(t, flux.FlatMapSequential(flux.Range(1, 5), pair, 4, 32)).
		ExpectNext(1, 2, 2, 3, 3, 4, 4, 5, 5, 6).ExpectComplete().VerifyT()
	// normalFusedSync with one inner at a time and a prefetch of 1
	testkit.Verify(t, flux.FlatMapSequential(flux.Range(1, 5), pair, 1, 1)).
		ExpectNext(1, 2, 2, 3, 3, 4, 4, 5, 5, 6).ExpectComplete().VerifyT()
	// testEmpty / empty inners
	testkit.Verify(t, flux.FlatMapSequential(flux.Range(0, 5), func(int) flux.Flux[int] { return flux.Empty[int]() }, 2, 2)).
		ExpectComplete().VerifyT()
	testkit.Verify(t, flux.FlatMapSequential(flux.Empty[int](), pair, 2, 2)).ExpectComplete().VerifyT()
	// mainErrorsImmediately / innerErrorsImmediately
	_, err := flux.Collect(t.Context(), flux.FlatMapSequential(failing, pair, 2, 2))
	require.ErrorIs(t, err, errBoom)
	testkit.Verify(t, flux.FlatMapSequential(flux.Range(0, 5), func(v int) flux.Flux[int] {
		if v == 2 {
			return flux.Error[int](errBoom)
		}
		return never
	}, 4, 2)).ExpectErrorIs(errBoom).VerifyT()
	// mapperThrows
	requirePanicError(t, flux.FlatMapSequential(flux.Just(1), boomFlux, 2, 2))
	// take: an early stop of the downstream
	testkit.Verify(t, flux.FlatMapSequential(endless, pair, 3, 2).Take(5)).ExpectNext(0, 1, 1, 2, 2).ExpectComplete().VerifyT()
	// invalid arguments
	testkit.Verify(t, flux.FlatMapSequential[int, int](flux.Just(1), nil, 1, 1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.FlatMapSequential(flux.Just(1), pair, 0, 1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.FlatMapSequential(flux.Just(1), pair, 1, 0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

func boomFlux(int) flux.Flux[int] { panic("boom") }

// The inners run at once, up to the concurrency, and their items come out in
// source order whatever order they finish in (reactor-core
// FluxMergeSequentialTest.mergeSequentialLargeUnorderedEach); on the fake
// clock the run takes the longest inner's time, not the sum.
func TestFlatMapSequentialRunsInnersAtOnce(t *testing.T) {
	leakFree(t)
	for _, c := range []struct {
		concurrency int
		took        time.Duration
	}{{4, 40 * time.Millisecond}, {2, 60 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			var running, peak atomic.Int64
			start := time.Now()
			f := flux.FlatMapSequential(flux.Range(1, 4), func(v int) flux.Flux[int] {
				return late(v, time.Duration(5-v)*10*time.Millisecond, &running, &peak)
			}, c.concurrency, 2)
			testkit.Verify(t, f).ExpectNext(1, 10, 2, 20, 3, 30, 4, 40).ExpectComplete().VerifyT()
			require.Equal(t, c.took, time.Since(start), "concurrency %d", c.concurrency)
			require.Equal(t, int64(c.concurrency), peak.Load())
		})
	}
}

// Every item an inner emitted is delivered or discarded, however the flow
// ends (an error of an inner while others have queued items, an early stop).
func TestFlatMapSequentialDiscards(t *testing.T) {
	leakFree(t)
	synctest.Test(t, func(t *testing.T) {
		var emitted atomic.Int64
		var d discarded[int]
		f := flux.FlatMapSequential(flux.Range(0, 4), func(v int) flux.Flux[int] {
			items := flux.Range(v*100, 5).DoOnNext(func(int) { emitted.Add(1) })
			if v == 0 {
				// The first inner waits, so that the others queue, then fails.
				return flux.Concat(flux.ConcatMap(flux.Timer(time.Second), func(int) flux.Flux[int] { return flux.Empty[int]() }),
					flux.Error[int](errBoom))
			}
			return items
		}, 4, 8)
		got, err := flux.Collect(t.Context(), watch(&d, f))
		require.ErrorIs(t, err, errBoom)
		require.Empty(t, got)
		require.Equal(t, emitted.Load(), int64(len(d.values())))
		require.Equal(t, int64(15), emitted.Load())

		d = discarded[int]{}
		emitted.Store(0)
		got, err = flux.Collect(t.Context(), watch(&d, flux.FlatMapSequential(flux.Range(0, 4), func(v int) flux.Flux[int] {
			return flux.Range(v*100, 5).DoOnNext(func(int) { emitted.Add(1) })
		}, 4, 8).Take(3)))
		require.NoError(t, err)
		require.Equal(t, emitted.Load(), int64(len(got)+len(d.values())))
	})
}

// reactor-core FluxMergeSequentialTest.mergeSequential: the sources' items in
// the order of the sources, the sources run at once.
func TestMergeSequential(t *testing.T) {
	leakFree(t)
	testkit.Verify(t, flux.MergeSequential(flux.Just(1, 2), flux.Just(3, 4), flux.Empty[int](), flux.Just(5))).
		ExpectNext(1, 2, 3, 4, 5).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.MergeSequential[int]()).ExpectComplete().VerifyT()
	_, err := flux.Collect(t.Context(), flux.MergeSequential(flux.Just(1), failing))
	require.ErrorIs(t, err, errBoom)
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int64
		start := time.Now()
		testkit.Verify(t, flux.MergeSequential(late(1, 30*time.Millisecond, &running, &peak), late(2, 10*time.Millisecond, &running, &peak))).
			ExpectNext(1, 10, 2, 20).ExpectComplete().VerifyT()
		require.Equal(t, 30*time.Millisecond, time.Since(start))
		require.Equal(t, int64(2), peak.Load())
	})
}

// Whatever the inners' sizes and delays, the concurrency, the prefetch and
// an early stop: the items delivered are a prefix of the inners' items
// concatenated in source order (all of them without a stop), and every item
// an inner emitted is delivered or discarded.
func TestFlatMapSequentialProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sizes := rapid.SliceOfN(rapid.IntRange(0, 6), 0, 8).Draw(rt, "inner sizes")
		delays := drawDelays(rt, "delays")
		concurrency := rapid.IntRange(1, 4).Draw(rt, "concurrency")
		prefetch := rapid.IntRange(1, 3).Draw(rt, "prefetch")
		var want []int
		for i, n := range sizes {
			for j := range n {
				want = append(want, i*10+j)
			}
		}
		take := rapid.IntRange(0, len(want)+1).Draw(rt, "take")
		var got []int
		var err error
		var emitted atomic.Int64
		var d discarded[int]
		synctest.Test(t, func(t *testing.T) {
			var k atomic.Int64
			f := flux.FlatMapSequential(flux.Range(0, len(sizes)), func(i int) flux.Flux[int] {
				return flux.Map(flux.Range(0, sizes[i]), func(j int) int {
					time.Sleep(delays[int(k.Add(1))%len(delays)])
					emitted.Add(1)
					return i*10 + j
				})
			}, concurrency, prefetch)
			got, err = flux.Collect(t.Context(), watch(&d, f.Take(take)))
		})
		require.NoError(rt, err)
		require.Equal(rt, append([]int{}, want[:min(take, len(want))]...), append([]int{}, got...))
		require.Equal(rt, emitted.Load(), int64(len(got)+len(d.values())), "delivered + discarded = emitted")
	})
}
