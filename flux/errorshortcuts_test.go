package flux_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

var errOtherKind = errors.New("other kind")

// requireEnds checks a flow's end: err wraps each of errs and, if pe, a
// *PanicError; neither: the flow completed.
func requireEnds(t *testing.T, err error, errs []error, pe bool) {
	t.Helper()
	if len(errs) == 0 && !pe {
		require.NoError(t, err)
	}
	for _, target := range errs {
		require.ErrorIs(t, err, target)
	}
	if pe {
		var p *flux.PanicError
		require.ErrorAs(t, err, &p)
	}
}

// Reactor's cases of onErrorResume with a predicate and of onErrorComplete
// (FluxOnErrorResumeTest, FluxOnErrorReturnTest's onErrorComplete cases),
// translated.
func TestOnErrorResumeIfAndComplete(t *testing.T) {
	leakFree(t)
	isBoom := func(err error) bool { return errors.Is(err, errBoom) }
	fallback := func(error) flux.Flux[int] { return flux.Just(10, 11) }
	failing := func(err error) flux.Flux[int] { return flux.Concat(flux.Just(1, 2), flux.Error[int](err)) }
	cases := []struct {
		name string
		f    flux.Flux[int]
		want []int
		errs []error // the flow's error wraps each; none: completes
		pe   bool    // and carries a *PanicError
	}{
		{name: "resume: no error", f: flux.Just(1, 2).OnErrorResumeIf(isBoom, fallback), want: []int{1, 2}},
		{name: "resume: matching error", f: failing(errBoom).OnErrorResumeIf(isBoom, fallback), want: []int{1, 2, 10, 11}},
		{name: "resume: error filtered out", f: failing(errOtherKind).OnErrorResumeIf(isBoom, fallback), want: []int{1, 2}, errs: []error{errOtherKind}},
		{name: "resume: the fallback fails", f: failing(errBoom).OnErrorResumeIf(isBoom, func(error) flux.Flux[int] { return flux.Error[int](errBoom2) }),
			want: []int{1, 2}, errs: []error{errBoom2}},
		{name: "resume: the fallback gets the error", f: failing(errBoom).OnErrorResumeIf(isBoom, func(err error) flux.Flux[int] {
			return flux.Just(len(err.Error()))
		}), want: []int{1, 2, len(errBoom.Error())}},
		{name: "resume: the predicate panics", f: failing(errBoom).OnErrorResumeIf(func(error) bool { panic("pred") }, fallback),
			want: []int{1, 2}, errs: []error{errBoom}, pe: true},
		{name: "resume: the fallback function panics", f: failing(errBoom).OnErrorResumeIf(isBoom, func(error) flux.Flux[int] { panic("fb") }),
			want: []int{1, 2}, errs: []error{errBoom}, pe: true},
		{name: "resume: a cancellation is not resumed", f: flux.Range(1, 5).OnErrorResumeIf(func(error) bool { return true }, fallback).Take(2),
			want: []int{1, 2}},
		{name: "resume: nil predicate", f: failing(errBoom).OnErrorResumeIf(nil, fallback), errs: []error{flux.ErrInvalidArgument}},
		{name: "resume: nil function", f: failing(errBoom).OnErrorResumeIf(isBoom, nil), errs: []error{flux.ErrInvalidArgument}},
		{name: "complete: no error", f: flux.Just(1, 2).OnErrorComplete(), want: []int{1, 2}},
		{name: "complete: the error becomes completion", f: failing(errBoom).OnErrorComplete(), want: []int{1, 2}},
		{name: "complete: error at once", f: flux.Error[int](errBoom).OnErrorComplete()},
		{name: "complete: a panic upstream completes too", f: flux.Map(flux.Just(1, 0), func(v int) int { return 1 / v }).OnErrorComplete(), want: []int{1}},
		{name: "complete if: matching", f: failing(errBoom).OnErrorCompleteIf(isBoom), want: []int{1, 2}},
		{name: "complete if: not matching", f: failing(errOtherKind).OnErrorCompleteIf(isBoom), want: []int{1, 2}, errs: []error{errOtherKind}},
		{name: "complete if: the predicate panics", f: failing(errBoom).OnErrorCompleteIf(func(error) bool { panic("pred") }),
			want: []int{1, 2}, errs: []error{errBoom}, pe: true},
		{name: "complete if: nil predicate", f: failing(errBoom).OnErrorCompleteIf(nil), errs: []error{flux.ErrInvalidArgument}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := flux.Collect(t.Context(), c.f)
			require.Equal(t, c.want, nilIfEmpty(got))
			requireEnds(t, err, c.errs, c.pe)
		})
	}
}

// Reactor's cases of Retry.fixedDelay and Retry.max(...).filter
// (RetrySpecTest, FluxRetryWhenTest), translated, in virtual time: each
// attempt's start is recorded.
func TestRetryFixedDelayAndFilter(t *testing.T) {
	leakFree(t)
	const d = 100 * time.Millisecond
	isBoom := func(err error) bool { return errors.Is(err, errBoom) }
	cases := []struct {
		name     string
		fails    int
		spec     flux.RetrySpec
		want     []int
		errs     []error
		pe       bool
		attempts []time.Duration
	}{
		{name: "fixed delay: succeeds on the third attempt", fails: 2, spec: flux.RetryFixedDelay(3, d),
			want: []int{1, 2, 11, 12, 0}, attempts: []time.Duration{0, d, 2 * d}},
		{name: "fixed delay: exhausted", fails: 5, spec: flux.RetryFixedDelay(2, d),
			want: []int{1, 2, 11, 12, 21, 22}, errs: []error{flux.ErrRetriesExhausted, errBoom}, attempts: []time.Duration{0, d, 2 * d}},
		{name: "fixed delay: zero attempts", fails: 1, spec: flux.RetryFixedDelay(0, d),
			want: []int{1, 2}, errs: []error{flux.ErrRetriesExhausted, errBoom}, attempts: []time.Duration{0}},
		{name: "fixed delay: no failure, no wait", spec: flux.RetryFixedDelay(3, d), want: []int{0}, attempts: []time.Duration{0}},
		{name: "fixed delay: zero delay", fails: 2, spec: flux.RetryFixedDelay(3, 0),
			want: []int{1, 2, 11, 12, 0}, attempts: []time.Duration{0, 0, 0}},
		{name: "fixed delay: filtered out", fails: 2, spec: flux.RetryFixedDelay(3, d).WithFilter(func(err error) bool { return errors.Is(err, errOtherKind) }),
			want: []int{1, 2}, errs: []error{errBoom}, attempts: []time.Duration{0}},
		{name: "max: filter accepts", fails: 2, spec: flux.RetryMax(3).WithFilter(isBoom),
			want: []int{1, 2, 11, 12, 0}, attempts: []time.Duration{0, 0, 0}},
		{name: "max: filter replaced by nil retries all", fails: 1, spec: flux.RetryMax(1).WithFilter(isBoom).WithFilter(nil),
			want: []int{1, 2, 0}, attempts: []time.Duration{0, 0}},
		{name: "backoff: filter refuses", fails: 2, spec: flux.RetryBackoff(3, d).WithFilter(func(error) bool { return false }),
			want: []int{1, 2}, errs: []error{errBoom}, attempts: []time.Duration{0}},
		{name: "filter panics", fails: 2, spec: flux.RetryFixedDelay(3, d).WithFilter(func(error) bool { panic("filter") }),
			want: []int{1, 2}, errs: []error{errBoom}, pe: true, attempts: []time.Duration{0}},
		{name: "fixed delay: negative delay", spec: flux.RetryFixedDelay(3, -d), errs: []error{flux.ErrInvalidArgument}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &timedFlaky{fails: c.fails}
				timed, err := subscribeTimed(t.Context(), 0, src.flux().RetryWhen(c.spec), nil)
				require.Equal(t, c.want, values(timed))
				require.Equal(t, c.attempts, src.attempts)
				requireEnds(t, err, c.errs, c.pe)
			})
		})
	}
}

// The fixed delay never waits less than asked, whatever the delay, and
// the attempts are exactly delay apart on the fake clock.
func TestRetryFixedDelayNeverShorter(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, time.Millisecond, 1500 * time.Millisecond, time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			src := &timedFlaky{fails: 3}
			_, err := subscribeTimed(t.Context(), 0, src.flux().RetryWhen(flux.RetryFixedDelay(3, d)), nil)
			require.NoError(t, err)
			require.Len(t, src.attempts, 4)
			for k := 1; k < len(src.attempts); k++ {
				require.GreaterOrEqual(t, src.attempts[k]-src.attempts[k-1], d, "wait %d of %v", k, d)
			}
		})
	}
}

func ExampleFlux_OnErrorResumeIf() {
	errNotFound := errors.New("not found")
	lookup := flux.Concat(flux.Just("a"), flux.Error[string](errNotFound))
	got, err := flux.Collect(context.Background(), lookup.OnErrorResumeIf(
		func(err error) bool { return errors.Is(err, errNotFound) },
		func(error) flux.Flux[string] { return flux.Just("default") }))
	fmt.Println(got, err)
	// Output: [a default] <nil>
}

func ExampleFlux_OnErrorComplete() {
	f := flux.Concat(flux.Just(1, 2), flux.Error[int](errors.New("lost")))
	got, err := flux.Collect(context.Background(), f.OnErrorComplete())
	fmt.Println(got, err)
	// Output: [1 2] <nil>
}

func ExampleFlux_OnErrorCompleteIf() {
	errEOF := errors.New("end of input")
	f := flux.Concat(flux.Just(1, 2), flux.Error[int](errEOF))
	got, err := flux.Collect(context.Background(), f.OnErrorCompleteIf(func(err error) bool { return errors.Is(err, errEOF) }))
	fmt.Println(got, err)
	// Output: [1 2] <nil>
}

func ExampleRetryFixedDelay() {
	attempts := 0
	flaky := flux.Defer(func() flux.Flux[string] {
		attempts++
		if attempts < 3 {
			return flux.Error[string](errors.New("busy"))
		}
		return flux.Just("done")
	})
	got, err := flux.Collect(context.Background(), flaky.RetryWhen(flux.RetryFixedDelay(5, time.Millisecond)))
	fmt.Println(got, err, attempts)
	// Output: [done] <nil> 3
}

func ExampleRetrySpec_WithFilter() {
	errFatal := errors.New("fatal")
	attempts := 0
	f := flux.Defer(func() flux.Flux[int] {
		attempts++
		return flux.Error[int](errFatal)
	})
	spec := flux.RetryMax(5).WithFilter(func(err error) bool { return !errors.Is(err, errFatal) })
	_, err := flux.Collect(context.Background(), f.RetryWhen(spec))
	fmt.Println(err, attempts)
	// Output: fatal 1
}

func ExampleConcatMapEager() {
	f := flux.ConcatMapEager(flux.Just(1, 2, 3), func(v int) flux.Flux[int] {
		return flux.Just(v*10, v*10+1)
	}, 2, 4)
	got, err := flux.Collect(context.Background(), f)
	fmt.Println(got, err)
	// Output: [10 11 20 21 30 31] <nil>
}
