package flux_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestBufferTimeout(t *testing.T) {
	cases := []struct {
		name    string
		src     flux.Flux[int]
		limit   time.Duration
		onNext  func([]int) error
		want    []at[[]int]
		wantErr error
		lost    []int
	}{
		{name: "full slices", src: flux.Range(0, 6),
			want: []at[[]int]{{[]int{0, 1, 2}, 0}, {[]int{3, 4, 5}, 0}}},
		{name: "partial slice at completion", src: flux.Range(0, 4),
			want: []at[[]int]{{[]int{0, 1, 2}, 0}, {[]int{3}, 0}}},
		{name: "timer from the slice's first item",
			src:  paced(nil, step{0, 5 * ms}, step{1, 8 * ms}, step{2, 20 * ms}, step{3, 21 * ms}, step{4, 22 * ms}, step{5, 23 * ms}),
			want: []at[[]int]{{[]int{0, 1}, 15 * ms}, {[]int{2, 3, 4}, 22 * ms}, {[]int{5}, 23 * ms}}},
		{name: "empty", src: flux.Empty[int]()},
		{name: "no item, no slice", src: paced(nil, step{0, 50 * ms}),
			want: []at[[]int]{{[]int{0}, 50 * ms}}},
		{name: "error discards the partial slice", src: paced(errBoom, step{0, 1 * ms}, step{1, 2 * ms}),
			wantErr: errBoom, lost: []int{0, 1}},
		{name: "error after a timed slice", src: paced(errBoom, step{0, 1 * ms}, step{1, 20 * ms}),
			want: []at[[]int]{{[]int{0}, 11 * ms}}, wantErr: errBoom, lost: []int{1}},
		{name: "ctx ends", src: paced(errHang, step{0, 1 * ms}, step{1, 2 * ms}, step{2, 3 * ms}, step{3, 4 * ms}), limit: 5 * ms,
			want: []at[[]int]{{[]int{0, 1, 2}, 3 * ms}}, wantErr: context.DeadlineExceeded, lost: []int{3}},
		{name: "downstream fails on a full slice", src: flux.Range(0, 7), onNext: func([]int) error { return errBoom },
			want: []at[[]int]{{[]int{0, 1, 2}, 0}}, wantErr: errBoom},
		{name: "downstream fails on a timed slice", src: paced(errHang, step{0, 1 * ms}, step{1, 20 * ms}),
			onNext: func([]int) error { return errBoom },
			want:   []at[[]int]{{[]int{0}, 11 * ms}}, wantErr: errBoom},
		{name: "a timed slice waits for the downstream", src: paced(nil, step{0, 1 * ms}, step{1, 2 * ms}, step{2, 3 * ms}, step{3, 4 * ms}),
			onNext: func([]int) error { time.Sleep(30 * ms); return nil },
			want:   []at[[]int]{{[]int{0, 1, 2}, 3 * ms}, {[]int{3}, 33 * ms}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				got, err := subscribeTimed(t.Context(), c.limit, watch(&lost, flux.BufferTimeout(c.src, 3, 10*ms)), c.onNext)
				require.Equal(t, c.want, got)
				requireEnd(t, err, c.wantErr)
				require.Equal(t, c.lost, lost.values())
				if c.wantErr != nil {
					lost.allBecause(t, c.wantErr)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		got, err := flux.Collect(t.Context(), flux.BufferTimeout(paced(errHang, step{0, ms}, step{1, 20 * ms}), 3, 10*ms).Take(1))
		require.NoError(t, err, "Take on a timed slice stops the upstream")
		require.Equal(t, [][]int{{0}}, got)
		one, err := flux.Collect(t.Context(), flux.BufferTimeout(flux.Range(0, 3), 1, time.Hour))
		require.NoError(t, err)
		require.Equal(t, [][]int{{0}, {1}, {2}}, one)
		for _, f := range []flux.Flux[[]int]{flux.BufferTimeout(flux.Just(1), 0, ms), flux.BufferTimeout(flux.Just(1), 1, 0)} {
			_, err := flux.Collect(t.Context(), f)
			require.ErrorIs(t, err, flux.ErrInvalidArgument)
		}
	})
}

// The model: concatenating the slices gives the input, in order; no slice
// is empty or larger than n; no item waits longer than d past its slice's
// first item's arrival; and a slice shorter than n is cut by its timer
// (exactly d after its first item) or by the completion.
func TestBufferTimeoutProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "n")
		d := time.Duration(rapid.IntRange(1, 20).Draw(rt, "d")) * ms
		gaps := rapid.SliceOfN(rapid.IntRange(0, 15), 0, 40).Draw(rt, "gaps")
		slow := time.Duration(rapid.IntRange(0, 5).Draw(rt, "slow")) * ms // the downstream's time per slice
		var steps []step
		var when time.Duration
		for i, g := range gaps {
			when += time.Duration(g) * ms
			steps = append(steps, step{i, when})
		}
		arrived := map[int]time.Duration{}
		var got []at[[]int]
		var err error
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			src := paced(nil, steps...).DoOnNext(func(v int) { arrived[v] = time.Since(start) })
			got, err = subscribeTimed(t.Context(), 0, flux.BufferTimeout(src, n, d), func([]int) error {
				time.Sleep(slow)
				return nil
			})
		})
		require.NoError(rt, err)
		var all []int
		for i, b := range got {
			require.NotEmpty(rt, b.V)
			require.LessOrEqual(rt, len(b.V), n)
			all = append(all, b.V...)
			if slow > 0 {
				continue // a timed slice may wait for the downstream
			}
			waited := b.At - arrived[b.V[0]]
			require.LessOrEqual(rt, waited, d, "slice %d waited too long", i)
			if len(b.V) < n && i < len(got)-1 {
				require.Equal(rt, d, waited, "a short slice before the last is cut by its timer")
			}
		}
		require.Equal(rt, rapidRange(len(gaps)), all, "the slices, end to end, are the input")
		if model, ok := bufferModel(steps, n, d); ok && slow == 0 {
			require.Equal(rt, model, values(got), "with a fast downstream, the model's slices")
		}
	})
}

// bufferModel cuts steps into slices as BufferTimeout should with a
// downstream that takes no time; not ok when an item arrives at the very
// instant its slice's timer is due, which either may win.
func bufferModel(steps []step, n int, d time.Duration) (out [][]int, ok bool) {
	var cur []int
	var first time.Duration
	for _, s := range steps {
		if len(cur) > 0 && s.at == first+d {
			return nil, false
		}
		if len(cur) > 0 && s.at > first+d {
			out = append(out, cur)
			cur = nil
		}
		if len(cur) == 0 {
			first = s.at
		}
		cur = append(cur, s.v)
		if len(cur) == n {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, true
}

func ExampleBufferTimeout() {
	// Slices of 2, or what came within an hour of a slice's first item.
	got, err := flux.Collect(context.Background(), flux.BufferTimeout(flux.Range(0, 5), 2, time.Hour))
	fmt.Println(got, err)
	// Output: [[0 1] [2 3] [4]] <nil>
}

// A runtime.Goexit of the downstream on the timer's goroutine (t.FailNow in
// a handler under test) ends the flow with a *PanicError wrapping
// schedulers.ErrGoexit instead of hanging; BufferTimeout and Sample
// deliver there.
func TestTimedDeliveryGoexit(t *testing.T) {
	shapes := map[string]func(flux.Flux[int]) flux.Flux[int]{
		"BufferTimeout": func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Map(flux.BufferTimeout(f, 3, 10*ms), func(b []int) int { return b[0] })
		},
		"Sample": func(f flux.Flux[int]) flux.Flux[int] { return f.Sample(10 * ms) },
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				err := watch(&lost, shape(paced(errHang, step{0, ms}, step{1, 20 * ms}))).Subscribe(t.Context(), func(int) error {
					runtime.Goexit()
					return nil
				})
				require.ErrorIs(t, err, schedulers.ErrGoexit)
				var pe *flux.PanicError
				require.ErrorAs(t, err, &pe)
			})
		})
	}
}
