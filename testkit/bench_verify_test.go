package testkit_test

import (
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// BenchmarkVerify measures a run per item: the hand-over between the
// subscription's goroutine and the script's.
func BenchmarkVerify(b *testing.B) {
	const n = 1000
	v := testkit.Verify(b, flux.Range(0, n)).ExpectNextCount(n).ExpectComplete()
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/item")
}
