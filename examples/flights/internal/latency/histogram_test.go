package latency_test

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/examples/flights/internal/latency"
)

// TestQuantileBounds: the quantile reported is never below the exact one
// and at most one bucket width (12.5%) above it.
func TestQuantileBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		scale := rapid.SampledFrom([]int64{10, 1_000, 1_000_000, math.MaxInt64}).Draw(t, "scale")
		samples := rapid.SliceOfN(rapid.Int64Range(0, scale), 1, 200).Draw(t, "samples")
		q := rapid.Float64Range(0, 1).Draw(t, "q")
		var h latency.Histogram
		for _, s := range samples {
			h.Record(time.Duration(s))
		}
		slices.Sort(samples)
		rank := max(int(math.Ceil(q*float64(len(samples)))), 1)
		exact := samples[rank-1]
		got := int64(h.Quantile(q))
		assert.GreaterOrEqual(t, got, exact)
		assert.LessOrEqual(t, float64(got), float64(exact)*1.125)
		assert.Equal(t, int64(len(samples)), h.Count())
	})
}

func TestQuantileEdges(t *testing.T) {
	var h latency.Histogram
	assert.Equal(t, time.Duration(0), h.Quantile(0.5), "empty")
	h.Record(-time.Second)
	assert.Equal(t, time.Duration(0), h.Quantile(1), "a negative duration counts as 0")
	for range 99 {
		h.Record(time.Microsecond)
	}
	h.Record(time.Second)
	// 1000 ns = 0b1111101000 falls in the bucket [960, 1023].
	assert.Equal(t, 1023*time.Nanosecond, h.Quantile(0.5))
	assert.Equal(t, 1023*time.Nanosecond, h.Quantile(0.99))
	assert.InEpsilon(t, float64(time.Second), float64(h.Quantile(1)), 0.125)
}

func TestRecordConcurrently(t *testing.T) {
	var h latency.Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.Record(time.Duration(g*1000 + i))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(8000), h.Count())
	assert.InEpsilon(t, 7999, float64(h.Quantile(1)), 0.125)
}

// BenchmarkRecord compares Record with appending to a slice under a mutex,
// the obvious alternative.
func BenchmarkRecord(b *testing.B) {
	b.Run("histogram", func(b *testing.B) {
		var h latency.Histogram
		b.ReportAllocs()
		d := time.Duration(0)
		for b.Loop() {
			h.Record(d)
			d++
		}
	})
	b.Run("mutex-slice", func(b *testing.B) {
		var mu sync.Mutex
		var all []time.Duration
		b.ReportAllocs()
		d := time.Duration(0)
		for b.Loop() {
			mu.Lock()
			all = append(all, d)
			mu.Unlock()
			d++
		}
		if len(all) == 0 {
			b.Fatal("nothing recorded") // keeps the slice, as the baseline it stands for does
		}
	})
}

func ExampleHistogram() {
	var h latency.Histogram
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	fmt.Println(h.Count(), h.Quantile(0.5), h.Quantile(0.99))
	// Output: 100 53.247µs 106.495µs
}
