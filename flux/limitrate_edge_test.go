package flux_test

import (
	"math"
	"slices"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

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
