package flux_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/aggflow/aggflow/flux"
)

// BenchmarkMulticastEmit: EmitNext of ints into a multicast sink of
// capacity DefaultPublishBuffer read by 1 and 4 subscribers, each on a
// goroutine of its own, vs the hand-written fan-out (one buffered channel
// of the same capacity per subscriber, the emitter sending on each). The
// emitter waits for the slowest subscriber in both.
func BenchmarkMulticastEmit(b *testing.B) {
	const items = 100_000
	for _, subscribers := range []int{1, 4} {
		b.Run(fmt.Sprintf("sink/subscribers=%d", subscribers), func(b *testing.B) {
			ctx := context.Background()
			s, err := flux.NewMulticastSink[int](flux.DefaultPublishBuffer)
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range subscribers {
				wg.Go(func() {
					sum := 0
					if err := s.AsFlux().Subscribe(ctx, func(v int) error { sum += v; return nil }); err != nil {
						b.Error(err)
					}
				})
			}
			for s.CurrentSubscriberCount() < subscribers { // setup only: not timed
				runtime.Gosched()
			}
			loopItems(b, items, func() {
				for i := range items {
					if r := s.EmitNext(ctx, i); r != flux.EmitOK {
						b.Fatal(r)
					}
				}
			})
			s.TryEmitComplete()
			wg.Wait()
		})
		b.Run(fmt.Sprintf("channels/subscribers=%d", subscribers), func(b *testing.B) {
			chs := make([]chan int, subscribers)
			var wg sync.WaitGroup
			for i := range chs {
				chs[i] = make(chan int, flux.DefaultPublishBuffer)
				wg.Go(func() {
					sum := 0
					for v := range chs[i] {
						sum += v
					}
				})
			}
			loopItems(b, items, func() {
				for i := range items {
					for _, ch := range chs {
						ch <- i
					}
				}
			})
			for _, ch := range chs {
				close(ch)
			}
			wg.Wait()
		})
	}
}
