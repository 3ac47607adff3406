package flux_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestTimeout(t *testing.T) {
	cases := []struct {
		name     string
		src      flux.Flux[int]
		fallback *flux.Flux[int]
		limit    time.Duration
		onNext   func(int) error
		want     []at[int]
		wantErr  error
		end      time.Duration
		lost     []int
	}{
		{name: "items within the timeout", src: paced(nil, step{1, 5 * ms}, step{2, 14 * ms}, step{3, 23 * ms}),
			want: []at[int]{{1, 5 * ms}, {2, 14 * ms}, {3, 23 * ms}}, end: 23 * ms},
		{name: "no first item", src: never, wantErr: flux.ErrTimeout, end: 10 * ms},
		{name: "a gap after an item", src: paced(nil, step{1, 5 * ms}, step{2, 30 * ms}),
			want: []at[int]{{1, 5 * ms}}, wantErr: flux.ErrTimeout, end: 15 * ms},
		{name: "no terminal signal after the last item", src: paced(errHang, step{1, 5 * ms}, step{2, 10 * ms}),
			want: []at[int]{{1, 5 * ms}, {2, 10 * ms}}, wantErr: flux.ErrTimeout, end: 20 * ms},
		{name: "empty", src: flux.Empty[int](), end: 0},
		{name: "error before the timeout", src: paced(errBoom, step{1, 5 * ms}),
			want: []at[int]{{1, 5 * ms}}, wantErr: errBoom, end: 5 * ms},
		{name: "the downstream's time does not count", src: flux.Just(1, 2, 3),
			onNext: func(int) error { time.Sleep(time.Second); return nil },
			want:   []at[int]{{1, 0}, {2, time.Second}, {3, 2 * time.Second}}, end: 3 * time.Second},
		{name: "downstream fails", src: flux.Just(1, 2), onNext: func(int) error { return errBoom },
			want: []at[int]{{1, 0}}, wantErr: errBoom, end: 0},
		{name: "ctx ends first", src: never, limit: 5 * ms, wantErr: context.DeadlineExceeded, end: 5 * ms},
		{name: "an item that arrives after the timeout is discarded",
			src:  flux.Map(flux.Just(1), func(v int) int { time.Sleep(20 * ms); return v }),
			lost: []int{1}, wantErr: flux.ErrTimeout, end: 20 * ms},
		{name: "fallback", src: paced(nil, step{1, 5 * ms}, step{2, 30 * ms}), fallback: ptr(flux.Just(8, 9)),
			want: []at[int]{{1, 5 * ms}, {8, 15 * ms}, {9, 15 * ms}}, end: 15 * ms},
		{name: "no fallback needed", src: flux.Just(1), fallback: ptr(flux.Just(8)),
			want: []at[int]{{1, 0}}, end: 0},
		{name: "empty fallback", src: never, fallback: ptr(flux.Empty[int]()), end: 10 * ms},
		{name: "failing fallback", src: never, fallback: ptr(flux.Error[int](errBoom)), wantErr: errBoom, end: 10 * ms},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				f := c.src.Timeout(10 * ms)
				if c.fallback != nil {
					f = c.src.TimeoutTo(10*ms, *c.fallback)
				}
				requireTimed(t, t.Context(), c.limit, watch(&lost, f), c.onNext, c.want, c.wantErr, c.end)
				require.Equal(t, c.lost, lost.values())
				lost.allBecause(t, flux.ErrTimeout)
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		for _, f := range []flux.Flux[int]{flux.Just(1).Timeout(0), flux.Just(1).TimeoutTo(-1, flux.Just(2))} {
			_, err := flux.Collect(t.Context(), f)
			require.ErrorIs(t, err, flux.ErrInvalidArgument)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// The race of the timeout with an item is decided once: each item the
// upstream produced is either delivered or discarded, never both, never
// lost; the delivered ones are a prefix, and the flow fails with
// ErrTimeout exactly when one was discarded or the end came too late.
func TestTimeoutDecidesOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// ms before each item and before the end; never exactly the timeout,
		// which would race the timer at the same instant.
		notTen := rapid.Map(rapid.IntRange(0, 19), func(g int) int { return g + g/10 })
		gaps := rapid.SliceOfN(notTen, 0, 12).Draw(rt, "gaps")
		tail := notTen.Draw(rt, "tail")
		var got, lost, produced []int
		var err error
		synctest.Test(t, func(t *testing.T) {
			var hook discarded[int]
			// Map's function takes the gap without watching ctx, so an item
			// may reach Timeout after it fired; the last index is the end's gap.
			src := flux.Map(flux.Range(0, len(gaps)+1), func(i int) int {
				if i == len(gaps) {
					time.Sleep(time.Duration(tail) * ms)
					return -1
				}
				time.Sleep(time.Duration(gaps[i]) * ms)
				produced = append(produced, i)
				return i
			}).Filter(func(v int) bool { return v >= 0 })
			got, err = flux.Collect(t.Context(), watch(&hook, src.Timeout(10*ms)))
			// Filter discards the end's -1 (ErrFiltered), not Timeout.
			lost = slices.DeleteFunc(hook.values(), func(v int) bool { return v < 0 })
		})
		require.Equal(rt, produced, append(slices.Clone(got), lost...), "delivered then discarded is what was produced")
		require.LessOrEqual(rt, len(lost), 1)
		late := slices.IndexFunc(gaps, func(g int) bool { return g > 10 })
		switch {
		case late >= 0:
			require.ErrorIs(rt, err, flux.ErrTimeout)
			require.Len(rt, got, late)
		case tail > 10:
			require.ErrorIs(rt, err, flux.ErrTimeout)
			require.Len(rt, got, len(gaps))
		default:
			require.NoError(rt, err)
			require.Len(rt, got, len(gaps))
		}
	})
}

// The timeout never fires early, even when an item comes at the very
// instant it is due (either may then win): it fails exactly d after the
// last item delivered, and only if the next gap is d or more.
func TestTimeoutNeverEarly(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		gaps := rapid.SliceOfN(rapid.IntRange(0, 20), 0, 12).Draw(rt, "gaps")
		var got []at[int]
		var err error
		var end time.Duration
		synctest.Test(t, func(t *testing.T) {
			var steps []step
			var when time.Duration
			for i, g := range gaps {
				when += time.Duration(g) * ms
				steps = append(steps, step{i, when})
			}
			start := time.Now()
			got, err = collectTimed(t.Context(), paced(nil, steps...).Timeout(10*ms))
			end = time.Since(start)
		})
		if err == nil {
			require.Len(rt, got, len(gaps))
			for _, g := range gaps {
				require.LessOrEqual(rt, g, 10)
			}
			return
		}
		require.ErrorIs(rt, err, flux.ErrTimeout)
		var last time.Duration
		if len(got) > 0 {
			last = got[len(got)-1].At
		}
		require.Equal(rt, 10*ms, end-last, "fails exactly the timeout after the last item")
		require.GreaterOrEqual(rt, gaps[len(got)], 10)
	})
}

func ExampleFlux_Timeout() {
	never := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	_, err := flux.Collect(context.Background(), never.Timeout(time.Millisecond))
	fmt.Println(err)
	// Output: flux: Timeout: no signal within 1ms: flux: timeout
}

func ExampleFlux_TimeoutTo() {
	never := flux.Create(func(ctx context.Context, _ flux.Sink[string]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	got, err := flux.Collect(context.Background(), never.TimeoutTo(time.Millisecond, flux.Just("fallback")))
	fmt.Println(got, err)
	// Output: [fallback] <nil>
}
