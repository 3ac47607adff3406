package flux_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// pulledAhead subscribes f, whose sources count their items in a and b,
// and returns both counts once the first item reached the subscriber and
// everything else is blocked: how far the sources ran ahead of it.
func pulledAhead(t *testing.T, f flux.Flux[int], a, b *atomic.Int64) (int64, int64) {
	var na, nb int64
	err := f.Take(1).Subscribe(t.Context(), func(int) error {
		synctest.Wait()
		na, nb = a.Load(), b.Load()
		return nil
	})
	require.NoError(t, err)
	return na, nb
}

// LimitRate sizes the queue per source of the nearest combining operator:
// a source runs ahead by the item the operator took, the queue, and the
// item it waits to push.
func TestLimitRate(t *testing.T) {
	first := func(x, _ int) int { return x }
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			name  string
			limit int // 0: no LimitRate
			want  int64
		}{{"default", 0, 1 + 32 + 1}, {"LimitRate(4)", 4, 1 + 4 + 1}, {"LimitRate(1)", 1, 1 + 1 + 1}} {
			var a, b atomic.Int64
			f := flux.Zip(counted(-1, &a), counted(-1, &b), first)
			if c.limit > 0 {
				f = f.LimitRate(c.limit)
			}
			na, nb := pulledAhead(t, f, &a, &b)
			require.Equal(t, c.want, na, c.name)
			require.Equal(t, c.want, nb, c.name)
		}
		// Only the nearest: a Merge feeding the Zip keeps its default queue
		// (32 per source, two sources), and the item its loop is pushing.
		var a, b, c atomic.Int64
		f := flux.Zip(flux.Merge(counted(-1, &a), never), counted(-1, &b), first).LimitRate(2)
		na, nb := pulledAhead(t, f, &a, &b)
		require.Equal(t, int64(1+2+1+64+1), na)
		require.Equal(t, int64(1+2+1), nb)
		// Operators in between pass it on.
		f = flux.Map(flux.Merge(counted(-1, &c), never), double).Filter(func(int) bool { return true }).LimitRate(3)
		nc, _ := pulledAhead(t, f, &c, &c)
		require.Equal(t, int64(1+2*3+1), nc)
	})
	testkit.Verify(t, flux.Just(1, 2, 3).LimitRate(1)).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(1).LimitRate(0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

func ExampleFlux_LimitRate() {
	// The Merge pulls at most 8 items per source ahead of the subscriber.
	merged := flux.Merge(flux.Range(0, 100), flux.Range(100, 100)).LimitRate(8)
	n := 0
	err := merged.Subscribe(context.Background(), func(int) error { n++; return nil })
	fmt.Println(n, err)
	// Output: 200 <nil>
}

// LimitRate(math.MaxInt) is Reactor's unbounded limitRate; no n, however
// large, may make the combining operator's queue a make that panics.
func TestLimitRateHugeIsNoPanic(t *testing.T) {
	sum := func(a, b int) int { return a + b }
	ops := map[string]flux.Flux[int]{
		"Merge":           flux.Merge(flux.Just(1, 2), flux.Just(3)),
		"MergeDelayError": flux.MergeDelayError(flux.Just(1, 2), flux.Just(3)),
		"Zip":             flux.Zip(flux.Just(1, 2), flux.Just(10, 20), sum),
		"CombineLatest":   flux.CombineLatest(flux.Just(1), flux.Just(10), sum),
	}
	want := map[string][]int{
		"Merge": {1, 2, 3}, "MergeDelayError": {1, 2, 3}, "Zip": {11, 22}, "CombineLatest": {11},
	}
	for name, f := range ops {
		for _, n := range []int{math.MaxInt, math.MaxInt / 3, 1 << 40} {
			var got []int
			var err error
			require.NotPanicsf(t, func() { got, err = flux.Collect(t.Context(), f.LimitRate(n)) }, "%s LimitRate(%d)", name, n)
			require.NoError(t, err)
			slices.Sort(got)
			require.Equal(t, want[name], got, name)
		}
	}
}
