package flux_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
)

func TestSmokeDispatcherShape(t *testing.T) {
	s, err := schedulers.NewParallel("smoke", 2)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.DisposeGracefully(context.Background())) }()
	const groups, n = 8, 10000
	src := flux.Range(0, n)
	g := flux.GroupBy(src, func(v int) int { return v % groups }, groups, flux.WithGroupBuffer(4))
	out := flux.FlatMap(g, func(gf flux.GroupedFlux[int]) flux.Flux[int] {
		return flux.ConcatMap(gf.PublishOn(s, 4), func(v int) flux.Flux[int] { return flux.Just(v) })
	}, groups)
	var mu sync.Mutex
	last := map[int]int{}
	count := 0
	err = out.Subscribe(t.Context(), func(v int) error {
		mu.Lock()
		defer mu.Unlock()
		k := v % groups
		if p, ok := last[k]; ok {
			require.Less(t, p, v)
		}
		last[k] = v
		count++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, n, count)
}

func TestSmokeTake(t *testing.T) {
	got, err := flux.Collect(t.Context(), flux.Map(flux.Range(0, 100), func(v int) int { return v * 2 }).Filter(func(v int) bool { return v%4 == 0 }).Take(3))
	require.NoError(t, err)
	require.Equal(t, []int{0, 4, 8}, got)
}
