package flux_test

import (
	"context"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/reactivex/rxgo/v2"
)

// rxSum observes obs and sums its int items.
func rxSum(b *testing.B, obs rxgo.Observable) int {
	sum := 0
	for it := range obs.Observe() {
		if it.Error() {
			b.Fatal(it.E)
		}
		sum += it.V.(int)
	}
	return sum
}

// BenchmarkMerge: 4 sources of 25k ints each, merged and summed; flux
// Merge (a goroutine per source, one shared queue) vs rxgo.Merge.
func BenchmarkMerge(b *testing.B) {
	const sources, each = 4, 25_000
	b.Run("flux", func(b *testing.B) {
		fs := make([]flux.Flux[int], sources)
		for i := range fs {
			fs[i] = flux.Range(i*each, each)
		}
		f := flux.Merge(fs...)
		loopItems(b, sources*each, func() { sumOf(b, f) })
	})
	b.Run("rxgo", func(b *testing.B) {
		loopItems(b, sources*each, func() {
			obs := make([]rxgo.Observable, sources)
			for i := range obs {
				obs[i] = rxgo.Range(i*each, each)
			}
			rxSum(b, rxgo.Merge(obs))
		})
	})
}

// BenchmarkZip: two sources of 100k ints zipped into 100k sums; flux Zip
// (a goroutine and a queue per source) vs rxgo ZipFromIterable. Per item
// is per pair.
func BenchmarkZip(b *testing.B) {
	const items = 100_000
	add := func(x, y int) int { return x + y }
	b.Run("flux", func(b *testing.B) {
		f := flux.Zip(flux.Range(0, items), flux.Range(0, items), add)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("rxgo", func(b *testing.B) {
		zipper := func(_ context.Context, x, y any) (any, error) { return x.(int) + y.(int), nil }
		loopItems(b, items, func() {
			rxSum(b, rxgo.Range(0, items).ZipFromIterable(rxgo.Range(0, items), zipper))
		})
	})
}

// BenchmarkSwitchMap: 20k upstream ints, each mapped to an inner of two
// items; per item is per upstream item. flux SwitchMap switches at each
// item (an inner still running is cancelled); rxgo has no switchMap, and
// its nearest, FlatMap, reads the inners one after another, so flux
// ConcatMap doing that same work fused is shown too.
func BenchmarkSwitchMap(b *testing.B) {
	const items = 20_000
	twice := func(v int) flux.Flux[int] { return flux.Just(v, v) }
	b.Run("flux", func(b *testing.B) {
		f := flux.SwitchMap(flux.Range(0, items), twice)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("flux-ConcatMap", func(b *testing.B) {
		f := flux.ConcatMap(flux.Range(0, items), twice)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("rxgo-FlatMap", func(b *testing.B) {
		inner := func(it rxgo.Item) rxgo.Observable { return rxgo.Just(it.V, it.V)() }
		loopItems(b, items, func() { rxSum(b, rxgo.Range(0, items).FlatMap(inner)) })
	})
}
