package testkit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// Then pushes items into the Flux between steps, here through a channel
// the Flux reads; the steps after it match them.
func ExampleVerifier_Then() {
	t := &testing.T{} // in a test, the test's own *testing.T
	in := make(chan string)
	err := testkit.Verify(t, flux.FromChannel(in)).
		Then(func() { in <- "a"; in <- "b" }).
		ExpectNext("a", "b").
		Then(func() { close(in) }).
		ExpectComplete().
		Verify(context.Background())
	fmt.Println(err)
	// Output: <nil>
}

// The time steps run on the clock of the caller: inside synctest.Test, with
// the Flux built there too, hours pass at once; here, milliseconds of real
// time.
func ExampleVerifier_ExpectNoEvent() {
	t := &testing.T{}
	in := make(chan int, 1)
	v := testkit.Verify(t, flux.FromChannel(in)).
		ExpectNoEvent(time.Millisecond).
		Then(func() { in <- 1 }).
		ThenAwait(time.Millisecond).
		ExpectNext(1).
		ExpectTimeout(time.Millisecond)
	fmt.Println(v.Verify(context.Background()))

	// An item inside the window fails the step.
	in <- 2
	fmt.Println(testkit.Verify(t, flux.FromChannel(in)).ExpectNoEvent(time.Hour).ThenCancel().Verify(context.Background()))
	// Output:
	// <nil>
	// testkit: expectation failed: signal 0: got onNext(2), expected no signal within 1h0m0s
}

// RecordWith keeps the items the steps after it take, for a check of items
// whose order is not fixed.
func ExampleVerifier_RecordWith() {
	t := &testing.T{}
	merged := flux.FlatMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] { return flux.Just(v * 10) }, 3)
	err := testkit.Verify(t, merged).
		RecordWith().
		ExpectNextCount(3).
		ConsumeRecordedWith(func(got []int) { fmt.Println(slices.Sorted(slices.Values(got))) }).
		ExpectRecordedMatches(func(got []int) bool { return len(got) == 3 }).
		ExpectComplete().
		Verify(context.Background())
	fmt.Println(err)
	// Output:
	// [10 20 30]
	// <nil>
}

// ExpectErrorAs matches the error by type and keeps it, as errors.As does.
func ExampleVerifier_ExpectErrorAs() {
	t := &testing.T{}
	var pe *flux.PanicError
	err := testkit.Verify(t, flux.Map(flux.Just(1), func(int) int { panic("no") })).
		ExpectErrorAs(&pe).
		Verify(context.Background())
	fmt.Println(err, pe.Value)
	// Output: <nil> no
}

// The Assertions of a run tell what it discarded: of 1..10 grouped by v%3,
// two groups are taken and key 0's items dropped.
func ExampleVerifier_VerifyThenAssertThat() {
	t := &testing.T{}
	taken := flux.FlatMap(flux.GroupBy(flux.Range(1, 10), func(v int) int { return v % 3 }, 3).Take(2),
		func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }, 2)
	a, err := testkit.Verify(t, taken).ExpectNextCount(7).ExpectComplete().VerifyThenAssertThat(context.Background())
	a.HasDiscardedElements().HasDiscardedExactly(3, 6, 9)
	fmt.Println(err, slices.Sorted(slices.Values(a.Discarded())))
	// Output: <nil> [3 6 9]
}
