package bench_test

import (
	"testing"

	"github.com/aggflow/aggflow/bench"
)

// BenchmarkStreaming streams b.N exchanges through each implementation on
// the headline cells: ns/op is ns per exchange, allocs/op allocations per
// exchange. Reactor runs only in the streaming command.
func BenchmarkStreaming(b *testing.B) {
	for _, im := range bench.Impls {
		b.Run(im.Name, func(b *testing.B) {
			for _, c := range bench.HeadlineCells() {
				b.Run(c.String(), func(b *testing.B) {
					r := bench.NewRun(c, bench.NewWorkload(c.K, b.N), b.N, bench.RunOptions{})
					s := bench.SampleGoroutines()
					b.ReportAllocs()
					b.ResetTimer()
					handled, err := im.Run(r)
					b.StopTimer()
					b.ReportMetric(float64(s.Stop()), "goroutines")
					if err == nil {
						err = r.Verify(handled)
					}
					if err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}
