package flux_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"
)

// Reactor's FluxRepeatTest, FluxRepeatPredicateTest and FluxRepeatWhenTest
// cases without time (the backpressured variants have no counterpart).
// repeat(n, BooleanSupplier) is RepeatSpec{MaxRepeats: n, OnlyIf}; a
// companion that completes at once (repeatWhen(v -> Flux.empty())) has
// none: a RepeatSpec is asked after each completion, so the source is
// always subscribed once.
func TestRepeat(t *testing.T) {
	always := func(int) bool { return true }
	never := func(int) bool { return false }
	countdown := func(n int) func(int) bool {
		return func(int) bool { n--; return n >= 0 }
	}
	runCases(t, []opCase[int]{
		{name: "Repeat.zeroRepeat", f: flux.Range(1, 10).Repeat(0), want: seqFrom(1, 10)},
		{name: "Repeat.oneRepeat", f: flux.Range(1, 10).Repeat(1), want: append(seqFrom(1, 10), seqFrom(1, 10)...)},
		{name: "Repeat.twoRepeat", f: flux.Range(1, 5).Repeat(2), want: append(append(seqFrom(1, 5), seqFrom(1, 5)...), seqFrom(1, 5)...)},
		{name: "Repeat.repeatInfinite", f: flux.Range(1, 2).Repeat(math.MaxInt).Take(9), want: []int{1, 2, 1, 2, 1, 2, 1, 2, 1}},
		{name: "Repeat.timesInvalid", f: flux.Range(1, 2).Repeat(-1), wantErr: flux.ErrInvalidArgument},
		{name: "Repeat.twoRepeatNormalSupplier", f: flux.Range(1, 4).RepeatWhen(flux.RepeatSpec{MaxRepeats: 2, OnlyIf: always}),
			want: append(append(seqFrom(1, 4), seqFrom(1, 4)...), seqFrom(1, 4)...)},
		{name: "Repeat.twoRepeatNormalSupplier2", f: flux.Range(1, 4).RepeatWhen(flux.RepeatSpec{MaxRepeats: 0, OnlyIf: never}), want: seqFrom(1, 4)},
		{name: "Repeat.twoRepeatNormalSupplier4", f: flux.Range(1, 4).RepeatWhen(flux.RepeatSpec{MaxRepeats: 2, OnlyIf: never}), want: seqFrom(1, 4)},
		{name: "RepeatPredicate.nOne", f: flux.Range(1, 3).RepeatWhen(flux.RepeatSpec{MaxRepeats: 1, OnlyIf: always}), want: []int{1, 2, 3, 1, 2, 3}},
		{name: "RepeatPredicate.normal", f: flux.Range(1, 5).RepeatWhen(flux.RepeatSpec{MaxRepeats: math.MaxInt, OnlyIf: countdown(1)}),
			want: []int{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}},
		{name: "RepeatPredicate.dontRepeat", f: flux.Range(1, 5).RepeatWhen(flux.RepeatSpec{MaxRepeats: math.MaxInt, OnlyIf: never}), want: seqFrom(1, 5)},
		{name: "RepeatPredicate.predicateThrows", f: flux.Range(1, 5).RepeatWhen(flux.RepeatSpec{MaxRepeats: 1, OnlyIf: func(int) bool { panic("forced failure") }}),
			want: seqFrom(1, 5), wantErr: errPanic},
		{name: "RepeatPredicate.nMinusOne", f: flux.Range(1, 5).RepeatWhen(flux.RepeatSpec{MaxRepeats: -1}), wantErr: flux.ErrInvalidArgument},
		{name: "RepeatWhen.coldRepeater", f: flux.Just(1).RepeatWhen(flux.RepeatTimes(10)), want: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{name: "RepeatWhen.lateOtherEmptyCancelsSource", f: flux.Just(1).RepeatWhen(flux.RepeatTimes(1)), want: []int{1, 1}},
		{name: "RepeatWhen.lateOtherErrorCancelsSource", f: flux.Just(1).RepeatWhen(flux.RepeatSpec{MaxRepeats: 5, OnlyIf: func(n int) bool {
			if n > 0 {
				panic("boom")
			}
			return true
		}}), want: []int{1, 1}, wantErr: errPanic},
		{name: "RepeatWhen.coldError", f: failing.Repeat(3), want: seqFrom(0, 10), wantErr: errBoom},
		{name: "RepeatWhen.whenFactoryThrows", f: flux.Just(1).RepeatWhen(flux.RepeatSpec{MaxRepeats: 1, BackOff: func() backoff.BackOff { panic("forced failure") }}),
			wantErr: errPanic},
		{name: "RepeatWhen.repeaterErrorsInResponse", f: flux.Just(1).RepeatWhen(flux.RepeatSpec{MaxRepeats: 1, BackOff: func() backoff.BackOff { return panicky{} }}),
			want: []int{1}, wantErr: errPanic},
		{name: "RepeatWhen stopped by the schedule", f: flux.Just(1).RepeatWhen(flux.RepeatSpec{MaxRepeats: 5, BackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }}),
			want: []int{1}},
		// The downstream's error is not repeated.
		{name: "Repeat, the downstream stops early", f: flux.Range(1, 3).Repeat(math.MaxInt).TakeWhile(func(v int) bool { return v < 3 }),
			want: []int{1, 2}, dropped: []int{3}},
	})
	// repeat() of an empty source stops with ctx.
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	require.ErrorIs(t, flux.Empty[int]().Repeat(math.MaxInt).Subscribe(ctx, func(int) error { return nil }), context.DeadlineExceeded)
	// Every repeat is a fresh subscription of a cold source.
	var subs atomic.Int64
	src := flux.Defer(func() flux.Flux[int] { return flux.Just(int(subs.Add(1))) })
	got, err := flux.Collect(t.Context(), src.Repeat(2))
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, got)
}

// panicky is a BackOff whose NextBackOff panics.
type panicky struct{}

func (panicky) NextBackOff() time.Duration { panic("forced failure") }
func (panicky) Reset()                     {}

// waits is a BackOff giving ds in turn, then backoff.Stop.
type waits struct{ ds []time.Duration }

func (w *waits) NextBackOff() time.Duration {
	if len(w.ds) == 0 {
		return backoff.Stop
	}
	d := w.ds[0]
	w.ds = w.ds[1:]
	return d
}
func (w *waits) Reset() {}

// Reactor's FluxRepeatWhenTest.exponentialRepeat and exponentialRepeat2 in
// virtual time: the companion waits 1s, 2s, then 3s; RepeatFixedDelay; the
// end of ctx during a wait.
func TestRepeatWhenTimed(t *testing.T) {
	growing := func() backoff.BackOff {
		return &waits{ds: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}
	}
	synctest.Test(t, func(t *testing.T) {
		var i atomic.Int64
		counter := flux.MonoFromFunc(func() (int, error) { return int(i.Add(1)), nil }).Flux()
		requireTimed(t, t.Context(), 0, counter.RepeatWhen(flux.RepeatSpec{MaxRepeats: math.MaxInt, BackOff: growing}), nil,
			[]at[int]{{1, 0}, {2, time.Second}, {3, 3 * time.Second}, {4, 6 * time.Second}}, nil, 6*time.Second)
	})
	synctest.Test(t, func(t *testing.T) {
		var i atomic.Int64
		heyAt4 := flux.Defer(func() flux.Flux[string] {
			if i.Add(1) == 4 {
				return flux.Just("hey")
			}
			return flux.Empty[string]()
		})
		requireTimed(t, t.Context(), 0, heyAt4.RepeatWhen(flux.RepeatSpec{MaxRepeats: math.MaxInt, BackOff: growing}), nil,
			[]at[string]{{"hey", 6 * time.Second}}, nil, 6*time.Second)
	})
	synctest.Test(t, func(t *testing.T) {
		requireTimed(t, t.Context(), 0, flux.Just(7).RepeatWhen(flux.RepeatFixedDelay(2, 5*ms)), nil,
			[]at[int]{{7, 0}, {7, 5 * ms}, {7, 10 * ms}}, nil, 10*ms)
	})
	synctest.Test(t, func(t *testing.T) {
		// ctx ends 3ms into the second wait of 5ms: the wait is cut short.
		requireTimed(t, t.Context(), 8*ms, flux.Just(7).RepeatWhen(flux.RepeatFixedDelay(5, 5*ms)), nil,
			[]at[int]{{7, 0}, {7, 5 * ms}}, context.DeadlineExceeded, 8*ms)
	})
}
