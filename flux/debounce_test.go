package flux_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// timedCase is a case of a time operator in virtual time: the items with
// the time they reached the subscriber, the end and when it came, and what
// the discard hook for ints was given.
type timedCase[T any] struct {
	name    string
	f       flux.Flux[T]
	limit   time.Duration // ctx's deadline; 0: none
	onNext  func(T) error
	want    []at[T]
	wantErr error
	end     time.Duration
	dropped []int
	why     error
}

func runTimed[T any](t *testing.T, cases []timedCase[T]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var d discarded[int]
				start := time.Now()
				got, err := subscribeTimed(t.Context(), c.limit, watch(&d, c.f), c.onNext)
				require.Equal(t, c.end, time.Since(start), "when the flow ended")
				require.Equal(t, c.want, got)
				requireErr(t, err, c.wantErr)
				require.Equal(t, c.dropped, d.values(), "discarded")
				if c.why != nil {
					for _, why := range d.reasons() {
						requireErr(t, why, c.why)
					}
				}
			})
		})
	}
}

// Reactor's FluxSampleTimeoutTest cases with sampleTimeout(v ->
// Mono.delay(d)), which is Debounce(d), over paced sources, with the items
// superseded and the end of ctx and of the downstream.
func TestDebounce(t *testing.T) {
	leakFree(t)
	runTimed(t, []timedCase[int]{
		{name: "normal", f: paced(nil, step{1, 0}, step{2, 20 * ms}, step{3, 21 * ms}, step{4, 22 * ms}, step{5, 40 * ms}).Debounce(10 * ms),
			want: []at[int]{{1, 10 * ms}, {4, 32 * ms}, {5, 40 * ms}}, end: 40 * ms, dropped: []int{2, 3}, why: flux.ErrSuperseded},
		{name: "mainError", f: paced(errBoom, step{1, 0}).Debounce(10 * ms), wantErr: errBoom, dropped: []int{1}, why: errBoom},
		{name: "sampleIncludesLastItem", f: flux.Concat(flux.Range(1, 5), paced(nil, step{80, 260 * ms}, step{90, 260 * ms}, step{100, 260 * ms})).Debounce(250 * ms),
			want: []at[int]{{5, 250 * ms}, {100, 260 * ms}}, end: 260 * ms, dropped: []int{1, 2, 3, 4, 80, 90}, why: flux.ErrSuperseded},
		{name: "sourceTerminatesBeforeSamplingEmitsLast", f: flux.Just(1, 2).Debounce(250 * ms),
			want: []at[int]{{2, 0}}, dropped: []int{1}, why: flux.ErrSuperseded},
		{name: "sourceErrorsBeforeSamplingNoEmission", f: flux.Concat(flux.Just(1, 2), flux.Error[int](errBoom)).Debounce(250 * ms),
			wantErr: errBoom, dropped: []int{1, 2}},
		{name: "a steady stream emits nothing until it pauses", f: paced(errHang, step{1, 0}, step{2, 5 * ms}, step{3, 10 * ms}, step{4, 15 * ms}).Debounce(10 * ms),
			limit: 40 * ms, want: []at[int]{{4, 25 * ms}}, wantErr: context.DeadlineExceeded, end: 40 * ms, dropped: []int{1, 2, 3}},
		{name: "ctx ends while an item waits", f: paced(errHang, step{1, 0}).Debounce(10 * ms), limit: 5 * ms,
			wantErr: context.DeadlineExceeded, end: 5 * ms, dropped: []int{1}, why: context.DeadlineExceeded},
		{name: "the downstream fails on a debounced item", f: paced(errHang, step{1, 0}, step{2, 30 * ms}).Debounce(10 * ms),
			onNext: func(int) error { return errStop }, want: []at[int]{{1, 10 * ms}}, wantErr: errStop, end: 10 * ms},
		{name: "the downstream fails on the last item", f: flux.Just(1).Debounce(10 * ms),
			onNext: func(int) error { return errStop }, want: []at[int]{{1, 0}}, wantErr: errStop},
		{name: "the downstream panics", f: paced(errHang, step{1, 0}).Debounce(10 * ms),
			onNext: func(int) error { panic("boom") }, want: []at[int]{{1, 10 * ms}}, wantErr: errPanic, end: 10 * ms},
		{name: "zero duration", f: flux.Just(1).Debounce(0), wantErr: flux.ErrInvalidArgument},
	})
}

// Reactor's FluxBufferBoundaryTest.bufferWillSubdivideAnInputFluxTime
// (buffer(Duration) over delayElements), and the ends.
func TestBufferDuration(t *testing.T) {
	leakFree(t)
	runTimed(t, []timedCase[[]int]{
		{name: "bufferWillSubdivideAnInputFluxTime", f: flux.BufferDuration(flux.Range(1, 8).DelayElements(99*ms), 200*ms),
			want: []at[[]int]{{[]int{1, 2}, 200 * ms}, {[]int{3, 4}, 400 * ms}, {[]int{5, 6}, 600 * ms}, {[]int{7, 8}, 792 * ms}}, end: 792 * ms},
		{name: "no empty slice for an empty period", f: flux.BufferDuration(paced(nil, step{1, 0}, step{2, 350 * ms}), 100*ms),
			want: []at[[]int]{{[]int{1}, 100 * ms}, {[]int{2}, 350 * ms}}, end: 350 * ms},
		{name: "the periods run from the subscription", f: flux.BufferDuration(paced(nil, step{1, 90 * ms}, step{2, 110 * ms}, step{3, 150 * ms}), 100*ms),
			want: []at[[]int]{{[]int{1}, 100 * ms}, {[]int{2, 3}, 150 * ms}}, end: 150 * ms},
		{name: "error discards the partial slice", f: flux.BufferDuration(paced(errBoom, step{1, 0}, step{2, 150 * ms}, step{3, 160 * ms}), 100*ms),
			want: []at[[]int]{{[]int{1}, 100 * ms}}, wantErr: errBoom, end: 160 * ms, dropped: []int{2, 3}, why: errBoom},
		{name: "ctx ends", f: flux.BufferDuration(paced(errHang, step{1, 0}), 100*ms), limit: 50 * ms,
			wantErr: context.DeadlineExceeded, end: 50 * ms, dropped: []int{1}, why: context.DeadlineExceeded},
		{name: "the downstream fails", f: flux.BufferDuration(paced(errHang, step{1, 0}, step{2, 120 * ms}), 100*ms),
			onNext: func([]int) error { return errStop }, want: []at[[]int]{{[]int{1}, 100 * ms}}, wantErr: errStop, end: 100 * ms},
		{name: "empty", f: flux.BufferDuration(flux.Empty[int](), 100*ms)},
		{name: "zero duration", f: flux.BufferDuration(flux.Just(1), 0), wantErr: flux.ErrInvalidArgument},
	})
}

// Reactor's FluxElapsedTest.aFluxCanBeBenchmarked and
// FluxTimestampTest.aFluxCanBeTimestamped: the item comes 2s after the
// subscription (there, requested then; here, delayed), and items after it.
func TestElapsedTimestamp(t *testing.T) {
	leakFree(t)
	synctest.Test(t, func(t *testing.T) {
		got, err := flux.Collect(t.Context(), flux.Elapsed(flux.Just("test").DelayElements(2*time.Second)))
		require.NoError(t, err)
		require.Equal(t, []flux.ElapsedValue[string]{{Elapsed: 2 * time.Second, Value: "test"}}, got)
		start := time.Now().Round(0)
		got2, err := flux.Collect(t.Context(), flux.Timestamp(flux.Just("test").DelayElements(2*time.Second)))
		require.NoError(t, err)
		require.Equal(t, []flux.TimestampedValue[string]{{Time: start.Add(2 * time.Second), Value: "test"}}, stripMono(got2))
	})
	synctest.Test(t, func(t *testing.T) {
		src := paced(nil, step{1, 0}, step{2, 30 * ms}, step{3, 100 * ms})
		got, err := flux.Collect(t.Context(), flux.Elapsed(src))
		require.NoError(t, err)
		require.Equal(t, []flux.ElapsedValue[int]{{0, 1}, {30 * ms, 2}, {70 * ms, 3}}, got)
		start := time.Now().Round(0)
		stamped, err := flux.Collect(t.Context(), flux.Timestamp(src))
		require.NoError(t, err)
		require.Equal(t, []flux.TimestampedValue[int]{{start, 1}, {start.Add(30 * ms), 2}, {start.Add(100 * ms), 3}}, stripMono(stamped))
	})
	// The downstream's error and an upstream error pass.
	requireEnd(t, flux.Elapsed(flux.Just(1, 2)).Subscribe(t.Context(), func(flux.ElapsedValue[int]) error { return errStop }), errStop)
	requireEnd(t, flux.Timestamp(failing).Subscribe(t.Context(), func(flux.TimestampedValue[int]) error { return nil }), errBoom)
}

// stripMono drops the monotonic clock readings, so that times compare
// with require.Equal.
func stripMono[T any](vs []flux.TimestampedValue[T]) []flux.TimestampedValue[T] {
	for i := range vs {
		vs[i].Time = vs[i].Time.Round(0)
	}
	return vs
}
