package flux_test

import (
	"strconv"
	"testing"

	"github.com/aggflow/aggflow/flux"
)

// BenchmarkOrderedConcurrency: 1,000 inners of 100 ints each (100k items)
// through FlatMap (merged in no fixed order) and FlatMapSequential (in
// source order), both at concurrency 8.
func BenchmarkOrderedConcurrency(b *testing.B) {
	const inners, per, concurrency = 1_000, 100, 8
	inner := func(v int) flux.Flux[int] { return flux.Range(v*per, per) }
	b.Run("FlatMap", func(b *testing.B) {
		f := flux.FlatMap(flux.Range(0, inners), inner, concurrency)
		loopItems(b, inners*per, func() { sumOf(b, f) })
	})
	b.Run("FlatMapSequential", func(b *testing.B) {
		f := flux.FlatMapSequential(flux.Range(0, inners), inner, concurrency, 32)
		loopItems(b, inners*per, func() { sumOf(b, f) })
	})
}

// BenchmarkGroupByKeyed: 100k ints into 16 groups, each merged by a FlatMap
// of concurrency 16: bucketed GroupBy (int keys in [0, 16)) beside
// GroupByKey by a string key (the bucket's name, made once per bucket).
func BenchmarkGroupByKeyed(b *testing.B) {
	const items, groups = 100_000, 16
	names := make([]string, groups)
	for i := range names {
		names[i] = "customer-" + strconv.Itoa(i)
	}
	b.Run("GroupBy", func(b *testing.B) {
		f := flux.FlatMap(flux.GroupBy(flux.Range(0, items), func(v int) int { return v % groups }, groups),
			func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }, groups)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("GroupByKey", func(b *testing.B) {
		f := flux.FlatMap(flux.GroupByKey(flux.Range(0, items), func(v int) string { return names[v%groups] }, groups),
			func(g flux.KeyedFlux[string, int]) flux.Flux[int] { return g.Flux }, groups)
		loopItems(b, items, func() { sumOf(b, f) })
	})
}
