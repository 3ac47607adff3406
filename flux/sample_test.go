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

func TestSample(t *testing.T) {
	cases := []struct {
		name    string
		src     flux.Flux[int]
		limit   time.Duration
		onNext  func(int) error
		want    []at[int]
		wantErr error
		skipped []int // discarded with ErrSkipped
		lost    []int // discarded with the flow's end
	}{
		{name: "the latest of each period",
			src:     paced(nil, step{1, 2 * ms}, step{2, 5 * ms}, step{3, 12 * ms}, step{4, 35 * ms}, step{5, 36 * ms}),
			want:    []at[int]{{2, 10 * ms}, {3, 20 * ms}, {5, 36 * ms}},
			skipped: []int{1, 4}},
		{name: "a period without items emits nothing", src: paced(nil, step{1, 2 * ms}, step{2, 25 * ms}),
			want: []at[int]{{1, 10 * ms}, {2, 25 * ms}}},
		{name: "the item held at completion is emitted with it", src: flux.Just(1, 2, 3),
			want: []at[int]{{3, 0}}, skipped: []int{1, 2}},
		{name: "empty", src: flux.Empty[int]()},
		{name: "error discards the item held", src: paced(errBoom, step{1, 2 * ms}, step{2, 12 * ms}),
			want: []at[int]{{1, 10 * ms}}, wantErr: errBoom, lost: []int{2}},
		{name: "ctx ends with an item held", src: paced(errHang, step{1, 2 * ms}, step{2, 12 * ms}), limit: 15 * ms,
			want: []at[int]{{1, 10 * ms}}, wantErr: context.DeadlineExceeded, lost: []int{2}},
		{name: "downstream fails on a sample", src: paced(errHang, step{1, 2 * ms}, step{2, 12 * ms}),
			onNext: func(int) error { return errBoom },
			want:   []at[int]{{1, 10 * ms}}, wantErr: errBoom},
		{name: "downstream fails at completion", src: flux.Just(1), onNext: func(int) error { return errBoom },
			want: []at[int]{{1, 0}}, wantErr: errBoom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				got, err := subscribeTimed(t.Context(), c.limit, watch(&lost, c.src.Sample(10*ms)), c.onNext)
				require.Equal(t, c.want, got)
				requireEnd(t, err, c.wantErr)
				var skipped, ended []int
				for i, v := range lost.items {
					if lost.why[i] == flux.ErrSkipped {
						skipped = append(skipped, v)
					} else {
						require.ErrorIs(t, lost.why[i], c.wantErr)
						ended = append(ended, v)
					}
				}
				require.Equal(t, c.skipped, skipped)
				require.Equal(t, c.lost, ended)
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		got, err := flux.Collect(t.Context(), paced(errHang, step{1, 2 * ms}, step{2, 12 * ms}).Sample(10*ms).Take(1))
		require.NoError(t, err)
		require.Equal(t, []int{1}, got)
		require.Equal(t, 10*ms, time.Since(start), "Take cancels the upstream at once")
		_, err = flux.Collect(t.Context(), flux.Just(1).Sample(0))
		require.ErrorIs(t, err, flux.ErrInvalidArgument)
	})
}

// Discard accounting: every item is sampled or discarded, exactly once,
// and the samples are in order.
func TestSampleAccounting(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		gaps := rapid.SliceOfN(rapid.IntRange(0, 25), 0, 30).Draw(rt, "gaps")
		var got, lost []int
		var err error
		var reasons []error
		synctest.Test(t, func(t *testing.T) {
			var steps []step
			var when time.Duration
			for i, g := range gaps {
				when += time.Duration(g) * ms
				steps = append(steps, step{i, when})
			}
			var hook discarded[int]
			got, err = flux.Collect(t.Context(), watch(&hook, paced(nil, steps...).Sample(10*ms)))
			lost, reasons = hook.values(), hook.why
		})
		require.NoError(rt, err)
		require.True(rt, slices.IsSorted(got))
		all := append(slices.Clone(got), lost...)
		slices.Sort(all)
		require.Equal(rt, rapidRange(len(gaps)), all, "each item sampled or discarded, once")
		for _, why := range reasons {
			require.ErrorIs(rt, why, flux.ErrSkipped)
		}
		if len(gaps) > 0 {
			require.Equal(rt, len(gaps)-1, got[len(got)-1], "the last item is never skipped")
		}
	})
}

func rapidRange(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	if n == 0 {
		return nil
	}
	return out
}

func ExampleFlux_Sample() {
	// Within one period, only the latest item is kept: at completion it is
	// emitted with the completion, the others are discarded as skipped.
	got, err := flux.Collect(context.Background(), flux.Just(1, 2, 3).Sample(time.Hour))
	fmt.Println(got, err)
	// Output: [3] <nil>
}
