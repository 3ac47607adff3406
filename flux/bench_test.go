package flux_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/reactivex/rxgo/v2"
)

// loopItems runs body in a b.Loop loop, each run handling items items, and
// reports ns/item and allocs/item next to the per-op figures.
func loopItems(b *testing.B, items int, body func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		body()
	}
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(items)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/item")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/item")
}

// sumOf subscribes f and sums its items.
func sumOf(b *testing.B, f flux.Flux[int]) {
	sum := 0
	if err := f.Subscribe(context.Background(), func(v int) error { sum += v; return nil }); err != nil {
		b.Fatal(err)
	}
}

func inc(v int) int { return v + 1 }

// BenchmarkMapChain: 10 Maps over 1M ints, flux (fused, one goroutine) vs
// the same chain of rxgo Maps (a goroutine and a channel per stage).
func BenchmarkMapChain(b *testing.B) {
	const items, stages = 1_000_000, 10
	b.Run("flux", func(b *testing.B) {
		f := flux.Range(0, items)
		for range stages {
			f = flux.Map(f, inc)
		}
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("rxgo", func(b *testing.B) {
		ctx := context.Background()
		rxInc := func(_ context.Context, v any) (any, error) { return v.(int) + 1, nil }
		loopItems(b, items, func() {
			obs := rxgo.Range(0, items, rxgo.WithContext(ctx))
			for range stages {
				obs = obs.Map(rxInc, rxgo.WithContext(ctx))
			}
			sum := 0
			for it := range obs.Observe(rxgo.WithContext(ctx)) {
				sum += it.V.(int)
			}
		})
	})
}

// BenchmarkPublishOn: 100k ints handed from the subscribing goroutine to a
// NewSingle worker by PublishOn vs a buffered channel of the same capacity
// read by one goroutine.
func BenchmarkPublishOn(b *testing.B) {
	const items, prefetch = 100_000, 256
	b.Run("flux", func(b *testing.B) {
		s, err := schedulers.NewSingle("bench")
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = s.DisposeGracefully(context.Background()) }()
		f := flux.Range(0, items).PublishOn(s, prefetch)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("channel", func(b *testing.B) {
		loopItems(b, items, func() {
			ch, done := make(chan int, prefetch), make(chan int)
			go func() {
				sum := 0
				for v := range ch {
					sum += v
				}
				done <- sum
			}()
			for i := range items {
				ch <- i
			}
			close(ch)
			<-done
		})
	})
}
