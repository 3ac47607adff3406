package flux_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/flux"
)

// Items emitted before the subscriber arrives wait for it, up to the
// capacity; a second subscriber is refused.
func ExampleNewUnicastSink() {
	s, _ := flux.NewUnicastSink[string](2)
	fmt.Println(s.TryEmitNext("a"), s.TryEmitNext("b"), s.TryEmitNext("c"))
	s.TryEmitComplete()

	got, err := flux.Collect(context.Background(), s.AsFlux())
	fmt.Println(got, err)
	_, err = flux.Collect(context.Background(), s.AsFlux())
	fmt.Println(err)
	// Output:
	// ok ok zero subscriber
	// [a b] <nil>
	// flux: UnicastSink: second subscription: flux: unicast sink allows only one subscriber
}

// A multicast sink is warm: the first subscriber gets what was emitted
// before anyone subscribed; later ones get only what comes after them, and
// the terminal signal.
func ExampleNewMulticastSink() {
	s, _ := flux.NewMulticastSink[int](8)
	for i := range 3 {
		s.TryEmitNext(i)
	}
	s.TryEmitComplete()
	first, err := flux.Collect(context.Background(), s.AsFlux())
	fmt.Println(first, err)
	later, err := flux.Collect(context.Background(), s.AsFlux())
	fmt.Println(later, err)
	// Output:
	// [0 1 2] <nil>
	// [] <nil>
}

// Late subscribers get the last limit items, then the terminal signal.
func ExampleNewReplaySink() {
	s, _ := flux.NewReplaySink[int](2, 4)
	for i := range 5 {
		s.TryEmitNext(i)
	}
	s.TryEmitError(fmt.Errorf("sensor lost"))
	for range 2 {
		got, err := flux.Collect(context.Background(), s.AsFlux())
		fmt.Println(got, err)
	}
	// Output:
	// [3 4] sensor lost
	// [3 4] sensor lost
}

// EmitNext waits for room: a producer on another goroutine is held back by
// the subscriber, and nothing is refused.
func ExampleManySink_EmitNext() {
	s, _ := flux.NewUnicastSink[int](1)
	ctx := context.Background()
	go func() {
		for i := 1; i <= 100; i++ {
			if r := s.EmitNext(ctx, i); r != flux.EmitOK {
				panic(r)
			}
		}
		s.TryEmitComplete()
	}()
	sum := 0
	err := s.AsFlux().Subscribe(ctx, func(v int) error { sum += v; return nil })
	fmt.Println(sum, err)
	// Output: 5050 <nil>
}

// Under WithDropOldest a subscriber that lags by the capacity loses its
// oldest queued item, to its discard hook, and the emitter goes on.
func ExampleWithDropOldest() {
	s, _ := flux.NewUnicastSink[int](2, flux.WithDropOldest())
	var dropped []int
	hooked := flux.DoOnDiscard(s.AsFlux(), func(v int, reason error) {
		dropped = append(dropped, v) // reason: flux.ErrSinkOverflow
	})
	s.TryEmitNext(0)
	held, gate := make(chan int), make(chan struct{})
	done := make(chan []int)
	go func() {
		got, _ := flux.Collect(context.Background(), hooked.DoOnNext(func(v int) {
			if v == 0 {
				held <- v // the subscriber is attached and busy with 0
				<-gate
			}
		}))
		done <- got
	}()
	<-held
	for i := 1; i <= 5; i++ {
		s.TryEmitNext(i) // 1, 2 are queued; then each emission drops the oldest
	}
	s.TryEmitComplete()
	close(gate)
	fmt.Println(<-done, dropped)
	// Output: [0 4 5] [1 2 3]
}

// Publish(capacity).RefCount(n): the upstream is subscribed once, when the
// n-th subscriber arrives, and each subscriber gets every item.
func ExampleConnectableFlux_RefCount() {
	subscriptions := 0
	src := flux.Defer(func() flux.Flux[int] {
		subscriptions++
		return flux.Range(1, 4)
	})
	shared := src.Publish(16).RefCount(2)

	var wg sync.WaitGroup
	sums := make([]int, 2)
	for i := range sums {
		wg.Go(func() {
			_ = shared.Subscribe(context.Background(), func(v int) error { sums[i] += v; return nil })
		})
	}
	wg.Wait()
	fmt.Println(sums, "upstream subscribed", subscriptions, "time")
	// Output: [10 10] upstream subscribed 1 time
}

// Share connects at the first subscriber; once the upstream has completed,
// the next subscriber connects again.
func ExampleFlux_Share() {
	subscriptions := 0
	shared := flux.Defer(func() flux.Flux[string] {
		subscriptions++
		return flux.Just("tick", "tock")
	}).Share()
	for range 2 {
		got, err := flux.Collect(context.Background(), shared)
		fmt.Println(got, err)
	}
	fmt.Println("upstream subscribed", subscriptions, "times")
	// Output:
	// [tick tock] <nil>
	// [tick tock] <nil>
	// upstream subscribed 2 times
}
