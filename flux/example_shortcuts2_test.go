package flux_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aggflow/aggflow/flux"
)

func ExampleFlux_StartWith() {
	got, err := flux.Collect(context.Background(), flux.Just(3).StartWith(1, 2).ConcatWith(flux.Just(4)))
	fmt.Println(got, err)
	// Output: [1 2 3 4] <nil>
}

func ExampleFlux_ConcatWith() {
	got, err := flux.Collect(context.Background(), flux.Just("a").ConcatWith(flux.Just("b", "c")))
	fmt.Println(got, err)
	// Output: [a b c] <nil>
}

func ExampleFlux_MergeWith() {
	n, _, err := flux.Just(1, 2).MergeWith(flux.Just(3)).Count().Block(context.Background())
	fmt.Println(n, err)
	// Output: 3 <nil>
}

func ExampleFlux_TakeWhile() {
	got, err := flux.Collect(context.Background(), flux.Range(1, 10).TakeWhile(func(v int) bool { return v < 4 }))
	fmt.Println(got, err)
	// Output: [1 2 3] <nil>
}

func ExampleFlux_SkipWhile() {
	got, err := flux.Collect(context.Background(), flux.Just(1, 2, 5, 1).SkipWhile(func(v int) bool { return v < 3 }))
	fmt.Println(got, err)
	// Output: [5 1] <nil>
}

func ExampleFlux_TakeLast() {
	got, err := flux.Collect(context.Background(), flux.Range(1, 10).TakeLast(3))
	fmt.Println(got, err)
	// Output: [8 9 10] <nil>
}

func ExampleFlux_SkipLast() {
	got, err := flux.Collect(context.Background(), flux.Range(1, 5).SkipLast(2))
	fmt.Println(got, err)
	// Output: [1 2 3] <nil>
}

func ExampleBufferUntil() {
	endOfLine := func(s string) bool { return s == "\n" }
	lines, err := flux.Collect(context.Background(), flux.BufferUntil(flux.Just("a", "b", "\n", "c", "\n"), endOfLine, false))
	fmt.Printf("%q %v\n", lines, err)
	// Output: [["a" "b" "\n"] ["c" "\n"]] <nil>
}

func ExampleBufferWhile() {
	positive := func(v int) bool { return v > 0 }
	runs, err := flux.Collect(context.Background(), flux.BufferWhile(flux.Just(1, 2, 0, 3, -1, 4), positive))
	fmt.Println(runs, err)
	// Output: [[1 2] [3] [4]] <nil>
}

func ExampleFlux_Repeat() {
	got, err := flux.Collect(context.Background(), flux.Just(1, 2).Repeat(2))
	fmt.Println(got, err)
	// Output: [1 2 1 2 1 2] <nil>
}

func ExampleFlux_RepeatWhen() {
	// Poll until the source says it is done: at most 5 repeats, 1ms apart.
	polls := 0
	poll := flux.Defer(func() flux.Flux[int] { polls++; return flux.Just(polls) })
	spec := flux.RepeatFixedDelay(5, time.Millisecond)
	spec.OnlyIf = func(repeats int) bool { return polls < 3 }
	got, err := flux.Collect(context.Background(), poll.RepeatWhen(spec))
	fmt.Println(got, err)
	// Output: [1 2 3] <nil>
}

func ExampleZip3() {
	names := flux.Just("ada", "bob")
	ages := flux.Just(36, 41)
	admin := flux.Just(true, false)
	rows := flux.Zip3(names, ages, admin, func(n string, a int, adm bool) string { return fmt.Sprint(n, a, adm) })
	got, err := flux.Collect(context.Background(), rows)
	fmt.Printf("%q %v\n", got, err)
	// Output: ["ada36 true" "bob41 false"] <nil>
}

func ExampleZip4() {
	sum := flux.Zip4(flux.Just(1), flux.Just(10), flux.Just(100), flux.Just(1000), func(a, b, c, d int) int { return a + b + c + d })
	got, err := flux.Collect(context.Background(), sum)
	fmt.Println(got, err)
	// Output: [1111] <nil>
}

func ExampleZipN() {
	rounds := flux.ZipN([]flux.Flux[int]{flux.Just(1, 2), flux.Just(3, 4), flux.Just(5, 6, 7)})
	got, err := flux.Collect(context.Background(), rounds)
	fmt.Println(got, err)
	// Output: [[1 3 5] [2 4 6]] <nil>
}

func ExampleFlux_Cache() {
	subscriptions := 0
	src := flux.Defer(func() flux.Flux[int] { subscriptions++; return flux.Just(1, 2, 3) })
	cached := src.Cache(2)
	first, _ := flux.Collect(context.Background(), cached)
	second, _ := flux.Collect(context.Background(), cached)
	fmt.Println(first, second, subscriptions)
	// Output: [1 2 3] [2 3] 1
}

func ExampleFlux_Replay() {
	replayed := flux.Range(1, 5).Replay(2).AutoConnect(1)
	first, _ := flux.Collect(context.Background(), replayed)
	late, _ := flux.Collect(context.Background(), replayed)
	fmt.Println(first, late)
	// Output: [1 2 3 4 5] [4 5]
}

func ExampleConnectableFlux_AutoConnect() {
	auto := flux.Just("x").Publish(4).AutoConnect(1)
	got, err := flux.Collect(context.Background(), auto)
	fmt.Println(got, err)
	// A later subscriber gets the kept terminal signal.
	got, err = flux.Collect(context.Background(), auto)
	fmt.Println(got, err)
	// Output:
	// [x] <nil>
	// [] <nil>
}

func ExampleFlux_Debounce() {
	// Keystrokes closer than the wait, then the end: only the last one is emitted.
	keys := flux.Create(func(ctx context.Context, s flux.Sink[string]) error {
		for _, k := range []string{"g", "go", "gol"} {
			if err := s.Next(k); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := flux.Collect(context.Background(), keys.Debounce(time.Second))
	fmt.Println(got, err)
	// Output: [gol] <nil>
}

func ExampleBufferDuration() {
	got, err := flux.Collect(context.Background(), flux.BufferDuration(flux.Just(1, 2, 3), time.Hour))
	fmt.Println(got, err)
	// Output: [[1 2 3]] <nil>
}

func ExampleElapsed() {
	for v, err := range flux.Elapsed(flux.Just("a")).All(context.Background()) {
		fmt.Println(v.Value, v.Elapsed < time.Second, err)
	}
	// Output: a true <nil>
}

func ExampleTimestamp() {
	start := time.Now()
	for v, err := range flux.Timestamp(flux.Just("a")).All(context.Background()) {
		fmt.Println(v.Value, !v.Time.Before(start), err)
	}
	// Output: a true <nil>
}
