package flux_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

func ExampleMap() {
	squares := flux.Map(flux.Range(1, 6), func(v int) int { return v * v })
	even := squares.Filter(func(v int) bool { return v%2 == 0 })
	got, err := flux.Collect(context.Background(), even)
	fmt.Println(got, err)
	// Output: [4 16 36] <nil>
}

// The dispatcher's shape: one group per key, each handled one item at a time
// in arrival order, on a scheduler shared by all groups.
func ExampleGroupBy() {
	s, _ := schedulers.NewParallel("example", 2)
	defer s.DisposeGracefully(context.Background())

	words := flux.Just("apple", "bob", "avocado", "banana", "cherry", "blueberry")
	byLetter := flux.GroupBy(words, func(w string) int { return int(w[0] - 'a') }, 26)
	handled := flux.FlatMap(byLetter, func(g flux.GroupedFlux[string]) flux.Flux[string] {
		return flux.ConcatMap(g.PublishOn(s, 8), func(w string) flux.Flux[string] {
			return flux.Just(strings.ToUpper(w))
		})
	}, 26)

	var mu sync.Mutex
	perGroup := map[byte][]string{}
	_ = handled.Subscribe(context.Background(), func(w string) error {
		mu.Lock()
		defer mu.Unlock()
		perGroup[w[0]] = append(perGroup[w[0]], w)
		return nil
	})
	keys := make([]string, 0, len(perGroup))
	for k, ws := range perGroup {
		keys = append(keys, fmt.Sprintf("%c %v", k, ws))
	}
	sort.Strings(keys)
	fmt.Println(strings.Join(keys, "\n"))
	// Output:
	// A [APPLE AVOCADO]
	// B [BOB BANANA BLUEBERRY]
	// C [CHERRY]
}

func ExampleFlux_PublishOn() {
	s, _ := schedulers.NewSingle("delivery")
	defer s.DisposeGracefully(context.Background())

	sum := 0
	err := flux.Range(1, 100).PublishOn(s, 16).Subscribe(context.Background(), func(v int) error {
		sum += v // runs on the scheduler's goroutine, one item at a time
		return nil
	})
	fmt.Println(sum, err)
	// Output: 5050 <nil>
}

// Next blocks until the downstream took the item, so a fast producer waits
// for a slow consumer; Take stops the producer.
func ExampleCreate() {
	ticks := flux.Create(func(ctx context.Context, sink flux.Sink[int]) error {
		for i := 0; ; i++ {
			if err := sink.Next(i); err != nil {
				return err // the subscriber is gone
			}
		}
	})
	got, err := flux.Collect(context.Background(), ticks.Take(5))
	fmt.Println(got, err)
	// Output: [0 1 2 3 4] <nil>
}

func ExampleFlux_All() {
	for v, err := range flux.Just("a", "b", "c").All(context.Background()) {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println(v)
		if v == "b" {
			break // cancels the subscription
		}
	}
	// Output:
	// a
	// b
}

func ExampleDoOnDiscard() {
	failing := flux.Create(func(_ context.Context, s flux.Sink[int]) error {
		_ = s.Next(1)
		_ = s.Next(2)
		return fmt.Errorf("source failed")
	})
	buffered := flux.DoOnDiscard(flux.Buffer(failing, 3), func(v int, reason error) {
		fmt.Println("discarded", v, "because", reason)
	})
	err := buffered.Subscribe(context.Background(), func([]int) error { return nil })
	fmt.Println(err)
	// Output:
	// discarded 1 because source failed
	// discarded 2 because source failed
	// source failed
}

func ExampleFlux_DoOnEach() {
	err := flux.Just(1, 2).
		DoOnSubscribe(func() { fmt.Println("subscribe") }).
		DoOnEach(func(e flux.Event[int]) { fmt.Println(e.Kind, e.Value) }).
		Subscribe(context.Background(), func(int) error { return nil })
	fmt.Println(err)
	// Output:
	// subscribe
	// next 1
	// next 2
	// complete 0
	// <nil>
}

func ExampleFlux_OnBackpressureBuffer() {
	f := flux.Range(0, 5).OnBackpressureBuffer(8, flux.OverflowError)
	got, err := flux.Collect(context.Background(), f)
	fmt.Println(got, err)
	// Output: [0 1 2 3 4] <nil>
}
