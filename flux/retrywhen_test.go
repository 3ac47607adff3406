package flux_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
)

// timedFlaky emits 10*k+1, 10*k+2 on its k-th subscription (from 0) and then
// fails with errBoom, until it has failed fails times; then it emits 0 and
// completes. It records when each subscription started.
type timedFlaky struct {
	fails    int
	attempts []time.Duration
	start    time.Time
}

func (f *timedFlaky) flux() flux.Flux[int] {
	f.start = time.Now()
	return flux.Defer(func() flux.Flux[int] {
		k := len(f.attempts)
		f.attempts = append(f.attempts, time.Since(f.start))
		if k >= f.fails {
			return flux.Just(0)
		}
		return paced(errBoom, step{10*k + 1, 0}, step{10*k + 2, 0})
	})
}

// constant is a schedule of equal waits without jitter.
func constant(d time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
}

func TestRetryWhen(t *testing.T) {
	errOther := errors.New("other")
	cases := []struct {
		name     string
		fails    int
		spec     flux.RetrySpec
		limit    time.Duration
		onNext   func(int) error
		want     []int
		wantErr  []error
		panics   bool // the error carries a *PanicError
		attempts []time.Duration
	}{
		{name: "succeeds after two failures", fails: 2, spec: flux.RetrySpec{MaxAttempts: 3, BackOff: constant(time.Second)},
			want: []int{1, 2, 11, 12, 0}, attempts: []time.Duration{0, time.Second, 2 * time.Second}},
		{name: "no failure", fails: 0, spec: flux.RetryMax(3), want: []int{0}, attempts: []time.Duration{0}},
		{name: "retries exhausted", fails: 5, spec: flux.RetrySpec{MaxAttempts: 2, BackOff: constant(time.Second)},
			want: []int{1, 2, 11, 12, 21, 22}, wantErr: []error{flux.ErrRetriesExhausted, errBoom},
			attempts: []time.Duration{0, time.Second, 2 * time.Second}},
		{name: "zero spec retries nothing", fails: 1, want: []int{1, 2},
			wantErr: []error{flux.ErrRetriesExhausted, errBoom}, attempts: []time.Duration{0}},
		{name: "RetryMax waits for nothing", fails: 2, spec: flux.RetryMax(2),
			want: []int{1, 2, 11, 12, 0}, attempts: []time.Duration{0, 0, 0}},
		{name: "the schedule's Stop ends the retries", fails: 5,
			spec: flux.RetrySpec{MaxAttempts: 10, BackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }},
			want: []int{1, 2}, wantErr: []error{flux.ErrRetriesExhausted, errBoom}, attempts: []time.Duration{0}},
		{name: "filter refuses", fails: 2, spec: flux.RetrySpec{MaxAttempts: 3, Filter: func(err error) bool { return errors.Is(err, errOther) }},
			want: []int{1, 2}, wantErr: []error{errBoom}, attempts: []time.Duration{0}},
		{name: "filter accepts", fails: 1, spec: flux.RetrySpec{MaxAttempts: 3, Filter: func(err error) bool { return errors.Is(err, errBoom) }},
			want: []int{1, 2, 0}, attempts: []time.Duration{0, 0}},
		{name: "ctx ends during a wait: at once", fails: 5, spec: flux.RetrySpec{MaxAttempts: 3, BackOff: constant(time.Hour)},
			limit: time.Minute, want: []int{1, 2}, wantErr: []error{context.DeadlineExceeded}, attempts: []time.Duration{0}},
		{name: "a downstream error is not retried", fails: 5, spec: flux.RetryMax(3),
			onNext: func(v int) error { return errorIf(v == 2) }, want: []int{1, 2}, wantErr: []error{errBoom}, attempts: []time.Duration{0}},
		{name: "panic in the filter", fails: 1, spec: flux.RetrySpec{MaxAttempts: 3, Filter: func(error) bool { panic("filter") }},
			want: []int{1, 2}, wantErr: []error{errBoom}, panics: true, attempts: []time.Duration{0}},
		{name: "panic in the schedule", fails: 1, spec: flux.RetrySpec{MaxAttempts: 3, BackOff: func() backoff.BackOff { panic("schedule") }},
			panics: true},
		{name: "panic in NextBackOff", fails: 1, spec: flux.RetrySpec{MaxAttempts: 3, BackOff: func() backoff.BackOff { return panicking{} }},
			want: []int{1, 2}, wantErr: []error{errBoom}, panics: true, attempts: []time.Duration{0}},
		{name: "negative attempts", spec: flux.RetrySpec{MaxAttempts: -1}, wantErr: []error{flux.ErrInvalidArgument}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &timedFlaky{fails: c.fails}
				start := time.Now()
				timed, err := subscribeTimed(t.Context(), c.limit, src.flux().RetryWhen(c.spec), c.onNext)
				got := values(timed)
				require.Equal(t, c.want, got)
				require.Equal(t, c.attempts, src.attempts)
				if c.wantErr == nil && !c.panics {
					require.NoError(t, err)
				}
				for _, target := range c.wantErr {
					require.ErrorIs(t, err, target)
				}
				if c.panics {
					var pe *flux.PanicError
					require.ErrorAs(t, err, &pe)
				}
				if c.limit > 0 {
					require.Equal(t, c.limit, time.Since(start), "the wait ends with ctx")
				}
			})
		})
	}
}

// panicking is a BackOff whose NextBackOff panics.
type panicking struct{}

func (panicking) NextBackOff() time.Duration { panic("next") }
func (panicking) Reset()                     {}

// RetryBackoff is Reactor's Retry.backoff: the k-th wait is minBackoff *
// 2^(k-1), give or take half of it.
func TestRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &timedFlaky{fails: 4}
		got, err := flux.Collect(t.Context(), src.flux().RetryWhen(flux.RetryBackoff(4, 100*ms)))
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 11, 12, 21, 22, 31, 32, 0}, got)
		require.Len(t, src.attempts, 5)
		for k := 1; k < len(src.attempts); k++ {
			wait := src.attempts[k] - src.attempts[k-1]
			base := 100 * ms << (k - 1)
			require.GreaterOrEqual(t, wait, base/2, "wait %d", k)
			require.LessOrEqual(t, wait, base*3/2, "wait %d", k)
		}
	})
}

func ExampleFlux_RetryWhen() {
	errUnavailable := errors.New("unavailable")
	calls := 0
	src := flux.Defer(func() flux.Flux[string] {
		calls++
		if calls < 3 {
			return flux.Error[string](errUnavailable)
		}
		return flux.Just("ok")
	})
	spec := flux.RetrySpec{
		MaxAttempts: 5,
		BackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
		Filter:      func(err error) bool { return errors.Is(err, errUnavailable) },
	}
	got, err := flux.Collect(context.Background(), src.RetryWhen(spec))
	fmt.Println(got, err, calls)
	// Output: [ok] <nil> 3
}

func ExampleRetryMax() {
	calls := 0
	src := flux.Defer(func() flux.Flux[int] {
		calls++
		return flux.Error[int](errors.New("down"))
	})
	_, err := flux.Collect(context.Background(), src.RetryWhen(flux.RetryMax(2)))
	fmt.Println(err, calls)
	// Output: flux: RetryWhen: flux: retries exhausted after 2 retries: down 3
}

func ExampleRetryBackoff() {
	failing := flux.Error[int](errors.New("unavailable"))
	_, err := flux.Collect(context.Background(), failing.RetryWhen(flux.RetryBackoff(2, time.Millisecond)))
	fmt.Println(err)
	fmt.Println(errors.Is(err, flux.ErrRetriesExhausted))
	// Output:
	// flux: RetryWhen: flux: retries exhausted after 2 retries: unavailable
	// true
}

// An error that Filter rejects is the error signal as it is, the same
// value, on the last attempt as on any earlier one (backoff.Retry returns
// its Permanent wrapper when the tries have run out).
func TestRetryWhenRejectedErrorAsItIs(t *testing.T) {
	errFatal := errors.New("fatal")
	for attempts := range 3 {
		for failed := range attempts + 1 {
			subs := 0
			f := flux.Defer(func() flux.Flux[int] {
				subs++
				if subs <= failed {
					return flux.Error[int](errBoom)
				}
				return flux.Error[int](errFatal)
			})
			spec := flux.RetrySpec{MaxAttempts: attempts, Filter: func(err error) bool { return err == errBoom }}
			err := f.RetryWhen(spec).Subscribe(context.Background(), func(int) error { return nil })
			require.Truef(t, err == errFatal, "attempts %d, failed %d: got %T %v", attempts, failed, err, err)
			require.Equal(t, failed+1, subs)
		}
	}
}

// The downstream's error on the last attempt is returned as it is too.
func TestRetryWhenDownstreamErrorAsItIs(t *testing.T) {
	errStop := errors.New("stop")
	err := flux.Just(1).RetryWhen(flux.RetryMax(0)).Subscribe(context.Background(), func(int) error { return errStop })
	require.Truef(t, err == errStop, "got %T %v", err, err)
}
