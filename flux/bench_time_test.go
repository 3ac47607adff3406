package flux_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/reactivex/rxgo/v2"
)

// BenchmarkBufferTimeout: 100k ints cut into slices of n (the timeout, 1 s,
// never fires) by flux.BufferTimeout vs rxgo's BufferWithTimeOrCount (a
// goroutine and a channel per stage, a goroutine for the timer).
func BenchmarkBufferTimeout(b *testing.B) {
	const items = 100_000
	for _, n := range []int{8, 256} {
		b.Run("size="+strconv.Itoa(n)+"/flux", func(b *testing.B) {
			f := flux.BufferTimeout(flux.Range(0, items), n, time.Second)
			loopItems(b, items, func() {
				got := 0
				if err := f.Subscribe(context.Background(), func(s []int) error { got += len(s); return nil }); err != nil || got != items {
					b.Fatal(got, err)
				}
			})
		})
		b.Run("size="+strconv.Itoa(n)+"/rxgo", func(b *testing.B) {
			ctx := context.Background()
			loopItems(b, items, func() {
				obs := rxgo.Range(0, items, rxgo.WithContext(ctx)).
					BufferWithTimeOrCount(rxgo.WithDuration(time.Second), n, rxgo.WithContext(ctx))
				got := 0
				for it := range obs.Observe(rxgo.WithContext(ctx)) {
					got += len(it.V.([]any))
				}
				if got != items {
					b.Fatal(got)
				}
			})
		})
	}
}
