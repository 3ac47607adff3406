package testkit_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// sinkFlux is a Flux whose items are pushed, by a test step, into the Sink
// it publishes; it completes when done is closed.
func sinkFlux() (f flux.Flux[int], sinks <-chan flux.Sink[int], done chan<- struct{}) {
	ss, d := make(chan flux.Sink[int], 1), make(chan struct{})
	f = flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		ss <- s
		select {
		case <-d:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	return f, ss, d
}

// Then runs between steps on the script's goroutine; what it emits into a
// Sink is matched by the steps after it, in order.
func TestThenEmitsIntoASink(t *testing.T) {
	f, sinks, done := sinkFlux()
	var sink flux.Sink[int]
	var errs []error
	testkit.Verify(t, f).
		Then(func() {
			sink = <-sinks
			errs = append(errs, sink.Next(1), sink.Next(2))
		}).
		ExpectNext(1, 2).
		Then(func() { errs = append(errs, sink.Next(3)) }).
		ExpectNext(3).
		Then(func() { close(done) }).
		ExpectComplete().
		VerifyT()
	require.Equal(t, []error{nil, nil, nil}, errs)
}

// A script that expects other items than a Then emits fails at the first.
func TestThenWrongItemsFail(t *testing.T) {
	f, sinks, done := sinkFlux()
	defer close(done)
	err := testkit.Verify(t, f).
		Then(func() { s := <-sinks; _ = s.Next(1); _ = s.Next(2) }).
		ExpectNext(1, 3).
		ExpectComplete().
		Verify(t.Context())
	failsAt(t, err, 1, "got onNext(2), expected onNext(3)")
}

// A panic in a step's function fails the script with *flux.PanicError; a
// runtime.Goexit (t.FailNow) ends it, and the subscription is joined either
// way.
func TestStepFunctionsPanicAndExit(t *testing.T) {
	var ended atomic.Bool
	f := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		defer ended.Store(true)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	err := testkit.Verify(t, f).Then(func() { panic("in then") }).ThenCancel().Verify(t.Context())
	var pe *flux.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "in then", pe.Value)
	require.True(t, ended.Load())

	err = testkit.Verify(t, flux.Just(1)).ExpectNextMatches(func(int) bool { panic("in predicate") }).ExpectComplete().Verify(t.Context())
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "in predicate", pe.Value)

	ended.Store(false)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = testkit.Verify(t, f).Then(runtime.Goexit).ThenCancel().Verify(t.Context())
	}()
	<-exited
	require.True(t, ended.Load())
}

// The record holds the items the value steps after RecordWith took, in
// order; ConsumeRecordedWith and ExpectRecordedMatches read it.
func TestRecordWith(t *testing.T) {
	var got [][]int
	keep := func(rec []int) { got = append(got, rec) }
	below := func(n int) func(int) bool { return func(v int) bool { return v < n } }
	testkit.Verify(t, flux.Range(0, 6)).
		ExpectNext(0).
		RecordWith().
		ThenConsumeWhile(below(3)). // stops at 3, which the next step takes
		ConsumeRecordedWith(keep).
		ExpectNext(3).
		ConsumeRecordedWith(keep).
		RecordWith().
		ExpectNextCount(2).
		ExpectRecordedMatches(func(rec []int) bool { return slices.Equal(rec, []int{4, 5}) }).
		ConsumeRecordedWith(keep).
		ExpectComplete().
		VerifyT()
	require.Equal(t, [][]int{{1, 2}, {1, 2, 3}, {4, 5}}, got)
}

// Items in no fixed order (FlatMap) are checked through the record.
func TestRecordWithUnorderedItems(t *testing.T) {
	f := flux.FlatMap(flux.Range(0, 3), func(i int) flux.Flux[int] { return flux.Just(10*i, 10*i+1) }, 3)
	sorted := func(rec []int) bool {
		return slices.Equal(slices.Sorted(slices.Values(rec)), []int{0, 1, 10, 11, 20, 21})
	}
	testkit.Verify(t, f).RecordWith().ExpectNextCount(6).ExpectRecordedMatches(sorted).ExpectComplete().VerifyT()

	err := testkit.Verify(t, f).RecordWith().ExpectNextCount(5).ExpectRecordedMatches(sorted).ThenCancel().Verify(t.Context())
	require.ErrorIs(t, err, testkit.ErrExpectation)
	require.ErrorContains(t, err, "do not match the predicate")
}

// codeError is an error type of the test's, for ExpectErrorAs.
type codeError struct{ code int }

func (e codeError) Error() string { return fmt.Sprintf("code %d", e.code) }

// ExpectErrorAs matches by type, anywhere in the chain, and sets the target.
func TestExpectErrorAs(t *testing.T) {
	var pe *flux.PanicError
	testkit.Verify(t, flux.Map(flux.Just(1), func(int) int { panic("boom") })).ExpectErrorAs(&pe).VerifyT()
	require.Equal(t, "boom", pe.Value)

	var ce codeError
	wrapped := flux.Error[int](fmt.Errorf("wrapped: %w", codeError{7}))
	testkit.Verify(t, wrapped).ExpectErrorAs(&ce).VerifyT()
	require.Equal(t, 7, ce.code)

	var anyErr interface{ Error() string }
	testkit.Verify(t, flux.Error[int](errBoom)).ExpectErrorAs(&anyErr).VerifyT()
	require.Equal(t, errBoom, anyErr)

	failsAt(t, testkit.Verify(t, flux.Error[int](errBoom)).ExpectErrorAs(&ce).Verify(t.Context()),
		0, "got onError(boom), expected onError as testkit_test.codeError")
	failsAt(t, testkit.Verify(t, flux.Just(1)).ExpectNext(1).ExpectErrorAs(&pe).Verify(t.Context()),
		1, "got onComplete, expected onError as *component.PanicError")
	failsAt(t, testkit.Verify(t, flux.Just(1)).ExpectErrorAs(&pe).Verify(t.Context()),
		0, "got onNext(1), expected onError as")
	invalidScript(t, testkit.Verify(t, wrapped).ExpectErrorAs(ce).Verify(t.Context()), "the target must be a non-nil pointer")
}
