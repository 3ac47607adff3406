package flux_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/flux"
)

func appendInt(acc []int, v int) []int { return append(acc, v) }

// slicesOf runs each window to its end, in order, as one slice.
func slicesOf(ws flux.Flux[flux.Flux[int]]) flux.Flux[[]int] {
	return flux.ConcatMap(ws, func(w flux.Flux[int]) flux.Flux[[]int] { return flux.Reduce(w, []int(nil), appendInt) })
}

// flat runs each window to its end, in order, emitting its items.
func flat(ws flux.Flux[flux.Flux[int]]) flux.Flux[int] {
	return flux.ConcatMap(ws, func(w flux.Flux[int]) flux.Flux[int] { return w })
}

func TestWindow(t *testing.T) {
	cases := []struct {
		name    string
		flux    func() flux.Flux[[]int]
		limit   time.Duration
		want    []at[[]int]
		wantErr error
		lost    []int
		why     error // reason of every discarded item
	}{
		{name: "values", flux: func() flux.Flux[[]int] { return slicesOf(flux.Window(flux.Range(0, 7), 3)) },
			want: []at[[]int]{{[]int{0, 1, 2}, 0}, {[]int{3, 4, 5}, 0}, {[]int{6}, 0}}},
		{name: "no empty window after a full one", flux: func() flux.Flux[[]int] { return slicesOf(flux.Window(flux.Range(0, 6), 3)) },
			want: []at[[]int]{{[]int{0, 1, 2}, 0}, {[]int{3, 4, 5}, 0}}},
		{name: "a window completes once full, not at the next item",
			flux: func() flux.Flux[[]int] {
				return slicesOf(flux.Window(paced(nil, step{0, ms}, step{1, 2 * ms}, step{2, 3 * ms}, step{3, 50 * ms}), 3))
			},
			want: []at[[]int]{{[]int{0, 1, 2}, 3 * ms}, {[]int{3}, 50 * ms}}},
		{name: "empty", flux: func() flux.Flux[[]int] { return slicesOf(flux.Window(flux.Empty[int](), 3)) }},
		{name: "error reaches the window open", flux: func() flux.Flux[[]int] {
			return slicesOf(flux.Window(paced(errBoom, step{0, 0}, step{1, 0}, step{2, 0}, step{3, 0}), 3))
		}, want: []at[[]int]{{[]int{0, 1, 2}, 0}}, wantErr: errBoom},
		{name: "error between windows", flux: func() flux.Flux[[]int] {
			return slicesOf(flux.Window(paced(errBoom, step{0, 0}, step{1, 0}, step{2, 0}), 3))
		}, want: []at[[]int]{{[]int{0, 1, 2}, 0}}, wantErr: errBoom},
		{name: "abandoned windows: their other items are discarded", flux: func() flux.Flux[[]int] {
			return flux.Buffer(flux.ConcatMap(flux.Window(flux.Range(0, 7), 3), func(w flux.Flux[int]) flux.Flux[int] { return w.Take(1) }), 10)
		}, want: []at[[]int]{{[]int{0, 3, 6}, 0}}, lost: []int{1, 2, 4, 5}, why: flux.ErrCancelled},
		{name: "main stops early: the window open runs to its end, then the upstream is cancelled",
			flux: func() flux.Flux[[]int] {
				var steps []step
				for i := range 10 {
					steps = append(steps, step{i, time.Duration(i) * ms})
				}
				return slicesOf(flux.Window(paced(nil, steps...), 3).Take(2))
			},
			want: []at[[]int]{{[]int{0, 1, 2}, 2 * ms}, {[]int{3, 4, 5}, 5 * ms}}},
		{name: "ctx ends", flux: func() flux.Flux[[]int] {
			return flux.Buffer(flat(flux.Window(paced(errHang, step{0, ms}, step{1, 2 * ms}), 3)), 10)
		}, limit: 5 * ms, wantErr: context.DeadlineExceeded, lost: []int{0, 1}, why: context.DeadlineExceeded},
		{name: "WindowTimeout: values", flux: func() flux.Flux[[]int] {
			return slicesOf(flux.WindowTimeout(paced(nil, step{0, ms}, step{1, 5 * ms}, step{2, 20 * ms}, step{3, 21 * ms},
				step{4, 22 * ms}, step{5, 23 * ms}), 3, 10*ms))
		}, want: []at[[]int]{{[]int{0, 1}, 11 * ms}, {[]int{2, 3, 4}, 22 * ms}, {[]int{5}, 23 * ms}}},
		{name: "WindowTimeout: empty", flux: func() flux.Flux[[]int] { return slicesOf(flux.WindowTimeout(flux.Empty[int](), 3, ms)) }},
		{name: "WindowTimeout: error", flux: func() flux.Flux[[]int] {
			return slicesOf(flux.WindowTimeout(paced(errBoom, step{0, ms}, step{1, 20 * ms}), 3, 10*ms))
		}, want: []at[[]int]{{[]int{0}, 11 * ms}}, wantErr: errBoom},
		{name: "WindowTimeout: main stops early on a timed window", flux: func() flux.Flux[[]int] {
			return slicesOf(flux.WindowTimeout(paced(errHang, step{0, ms}, step{1, 20 * ms}), 3, 10*ms).Take(1))
		}, want: []at[[]int]{{[]int{0}, 11 * ms}}},
		{name: "WindowTimeout: abandoned window", flux: func() flux.Flux[[]int] {
			return flux.Buffer(flux.ConcatMap(flux.WindowTimeout(paced(nil, step{0, ms}, step{1, 2 * ms}, step{2, 20 * ms}), 3, 10*ms),
				func(w flux.Flux[int]) flux.Flux[int] { return w.Take(1) }), 10)
		}, want: []at[[]int]{{[]int{0, 2}, 20 * ms}}, lost: []int{1}, why: flux.ErrCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				got, err := subscribeTimed(t.Context(), c.limit, watch(&lost, c.flux()), nil)
				require.Equal(t, c.want, got)
				requireEnd(t, err, c.wantErr)
				require.Equal(t, c.lost, lost.values())
				if c.why != nil {
					lost.allBecause(t, c.why)
				}
			})
		})
	}
}

func TestWindowUnicastAndLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws, err := flux.Collect(t.Context(), flux.Window(flux.Range(0, 5), 3))
		require.NoError(t, err)
		require.Len(t, ws, 2)
		// Windows never subscribed keep their items for a late subscriber.
		got, err := flux.Collect(t.Context(), ws[1])
		require.NoError(t, err)
		require.Equal(t, []int{3, 4}, got)
		_, err = flux.Collect(t.Context(), ws[1])
		require.ErrorIs(t, err, flux.ErrUnicastGroup)
		got, err = flux.Collect(t.Context(), ws[0])
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 2}, got)

		for _, f := range []flux.Flux[flux.Flux[int]]{
			flux.Window(flux.Just(1), 0), flux.WindowTimeout(flux.Just(1), 0, ms), flux.WindowTimeout(flux.Just(1), 1, 0),
		} {
			_, err := flux.Collect(t.Context(), f)
			require.ErrorIs(t, err, flux.ErrInvalidArgument)
		}
	})
}

// The main flux's downstream failing cancels the window open: its items,
// and any the router pulled meanwhile, are discarded with that error.
func TestWindowDownstreamFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lost discarded[int]
		err := watch(&lost, flux.Window(flux.Range(0, 10), 3)).Subscribe(t.Context(), func(flux.Flux[int]) error { return errBoom })
		require.ErrorIs(t, err, errBoom)
		got := lost.values()
		slices.Sort(got)
		require.NotEmpty(t, got)
		require.Equal(t, rapidRange(len(got)), got, "the items pulled")
		lost.allBecause(t, errBoom)
	})
	synctest.Test(t, func(t *testing.T) {
		var ws []flux.Flux[int]
		err := flux.Window(flux.Range(0, 10), 3).Subscribe(t.Context(), func(w flux.Flux[int]) error {
			ws = append(ws, w)
			return errorIf(len(ws) == 2)
		})
		require.ErrorIs(t, err, errBoom)
		_, err = flux.Collect(t.Context(), ws[0])
		require.ErrorIs(t, err, errBoom, "a window cancelled by the failure tells its late subscriber why")
	})
}

// Discard accounting over windows consumed in parallel by FlatMap, each
// cut short at random: every item the upstream produced is delivered or
// discarded, exactly once, and each window is a run of consecutive items.
func TestWindowAccounting(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "n")
		items := rapid.IntRange(0, 30).Draw(rt, "items")
		// Items taken per window, by index mod 8; at least 1: a window never
		// subscribed keeps its items for a late subscriber.
		keep := rapid.SliceOfN(rapid.IntRange(1, 6), 8, 8).Draw(rt, "keep")
		timed := rapid.Bool().Draw(rt, "timed")
		var got [][]int
		var lost []int
		var reasons []error
		var err error
		synctest.Test(t, func(t *testing.T) {
			var steps []step
			for i := range items {
				steps = append(steps, step{i, time.Duration(i) * ms})
			}
			ws := flux.Window(paced(nil, steps...), n)
			if timed {
				ws = flux.WindowTimeout(paced(nil, steps...), n, 3*ms)
			}
			index := 0
			tagged := flux.Map(ws, func(w flux.Flux[int]) flux.Flux[[]int] {
				index++
				return flux.Reduce(w.Take(keep[index%8]), []int(nil), appendInt)
			})
			var hook discarded[int]
			got, err = flux.Collect(t.Context(), watch(&hook, flux.FlatMap(tagged, func(f flux.Flux[[]int]) flux.Flux[[]int] { return f }, 3)))
			lost, reasons = hook.values(), hook.why
		})
		require.NoError(rt, err)
		var all []int
		for _, w := range got {
			require.LessOrEqual(rt, len(w), n)
			for i := 1; i < len(w); i++ {
				require.Equal(rt, w[i-1]+1, w[i], "a window is a run of consecutive items")
			}
			all = append(all, w...)
		}
		all = append(all, lost...)
		slices.Sort(all)
		require.Equal(rt, rapidRange(items), all, "each item delivered or discarded, once")
		for _, why := range reasons {
			require.ErrorIs(rt, why, flux.ErrCancelled)
		}
	})
}

func ExampleWindow() {
	windows := flux.Window(flux.Range(0, 5), 2)
	sums := flux.ConcatMap(windows, func(w flux.Flux[int]) flux.Flux[int] {
		return flux.Reduce(w, 0, func(acc, v int) int { return acc + v })
	})
	got, err := flux.Collect(context.Background(), sums)
	fmt.Println(got, err)
	// Output: [1 5 4] <nil>
}

func ExampleWindowTimeout() {
	// Windows of 2, or what came within an hour of a window's first item.
	windows := flux.WindowTimeout(flux.Just("a", "b", "c"), 2, time.Hour)
	joined := flux.ConcatMap(windows, func(w flux.Flux[string]) flux.Flux[string] {
		return flux.Reduce(w, "", func(acc, v string) string { return acc + v })
	})
	got, err := flux.Collect(context.Background(), joined)
	fmt.Println(got, err)
	// Output: [ab c] <nil>
}

// A subscriber of Window whose onNext (given a window) calls
// runtime.Goexit leaves as one whose onNext failed does: the upstream,
// endless here, is cancelled and the router goroutine joined, as RefCount
// and the sinks do for a subscriber that exits.
func TestWindowSubscriberGoexitCancelsTheUpstream(t *testing.T) {
	leakFree(t)
	upstream := make(chan struct{})
	endless := flux.Create(func(ctx context.Context, sink flux.Sink[int]) error {
		defer close(upstream)
		for i := 0; ; i++ {
			if err := sink.Next(i); err != nil {
				return err
			}
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = flux.Window(endless, 2).Subscribe(context.Background(), func(flux.Flux[int]) error { runtime.Goexit(); return nil })
	}()
	<-done
	<-upstream // hangs (the test's timeout) while the upstream runs on
	require.True(t, true)
}
