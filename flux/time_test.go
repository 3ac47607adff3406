package flux_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
)

// Helpers of the time operators' tests. Every test runs in a
// testing/synctest bubble: the clock is fake and advances only when every
// goroutine of the bubble is durably blocked, so the times below are
// exact, and synctest.Test fails if a goroutine of the subscription is
// left over.

// at is an item and the virtual time since the subscription it reached the
// subscriber.
type at[T any] struct {
	V  T
	At time.Duration
}

// subscribeTimed subscribes f with ctx, bounded by limit when above 0,
// and records each item with its time; onNext (nil: none) is then called
// with it.
func subscribeTimed[T any](ctx context.Context, limit time.Duration, f flux.Flux[T], onNext func(T) error) ([]at[T], error) {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	start := time.Now()
	var out []at[T]
	err := f.Subscribe(ctx, func(v T) error {
		out = append(out, at[T]{v, time.Since(start)})
		if onNext != nil {
			return onNext(v)
		}
		return nil
	})
	return out, err
}

func collectTimed[T any](ctx context.Context, f flux.Flux[T]) ([]at[T], error) {
	return subscribeTimed(ctx, 0, f, nil)
}

// requireTimed runs f as subscribeTimed does and checks its items, its
// end and when it ended.
func requireTimed[T any](t *testing.T, ctx context.Context, limit time.Duration, f flux.Flux[T], onNext func(T) error,
	want []at[T], wantErr error, end time.Duration) {
	t.Helper()
	start := time.Now()
	got, err := subscribeTimed(ctx, limit, f, onNext)
	require.Equal(t, end, time.Since(start), "when the flow ended")
	require.Equal(t, want, got)
	requireEnd(t, err, wantErr)
}

// requireEnd checks the flow's end: completion if want is nil.
func requireEnd(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		require.NoError(t, err)
		return
	}
	require.ErrorIs(t, err, want)
}

// step is an item of paced and its time after the subscription.
type step struct {
	v  int
	at time.Duration
}

// errHang as the end of paced: it waits for ctx instead of ending.
var errHang = errors.New("hang")

// paced emits each step's item at its time after the subscription, then
// ends with end (errHang: no end); it watches ctx while it waits.
func paced(end error, steps ...step) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		start := time.Now()
		for _, st := range steps {
			t := time.NewTimer(time.Until(start.Add(st.at)))
			select {
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			case <-t.C:
			}
			if err := s.Next(st.v); err != nil {
				return err
			}
		}
		if end == errHang {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return end
	})
}

// discarded records what a discard hook is given; safe for concurrent use.
type discarded[T any] struct {
	mu    sync.Mutex
	items []T
	why   []error
}

func (d *discarded[T]) hook(v T, reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.items = append(d.items, v)
	d.why = append(d.why, reason)
}

// watch installs d's hook on f for the items of type U.
func watch[T, U any](d *discarded[U], f flux.Flux[T]) flux.Flux[T] {
	return flux.DoOnDiscard(f, d.hook)
}

func (d *discarded[T]) values() []T {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]T(nil), d.items...)
}

// allBecause checks that every discarded item was given a reason that is target.
func (d *discarded[T]) allBecause(t *testing.T, target error) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, why := range d.why {
		require.ErrorIs(t, why, target, "reason of discarded item %v", d.items[i])
	}
}

func values[T any](items []at[T]) []T {
	var out []T
	for _, it := range items {
		out = append(out, it.V)
	}
	return out
}

const ms = time.Millisecond

func TestInterval(t *testing.T) {
	cases := []struct {
		name    string
		flux    func() flux.Flux[int]
		limit   time.Duration // ctx deadline; 0: none
		onNext  func(v int) error
		want    []at[int]
		wantErr error
	}{
		{name: "take 3", flux: func() flux.Flux[int] { return flux.Interval(10 * ms).Take(3) },
			want: []at[int]{{0, 10 * ms}, {1, 20 * ms}, {2, 30 * ms}}},
		{name: "ctx ends between ticks", flux: func() flux.Flux[int] { return flux.Interval(10 * ms) }, limit: 25 * ms,
			want: []at[int]{{0, 10 * ms}, {1, 20 * ms}}, wantErr: context.DeadlineExceeded},
		{name: "ctx ends before the first tick", flux: func() flux.Flux[int] { return flux.Interval(10 * ms) }, limit: 5 * ms,
			wantErr: context.DeadlineExceeded},
		{name: "downstream fails", flux: func() flux.Flux[int] { return flux.Interval(10 * ms) },
			onNext: func(v int) error { return errorIf(v == 1) },
			want:   []at[int]{{0, 10 * ms}, {1, 20 * ms}}, wantErr: errBoom},
		{name: "ticks missed by a slow downstream count as one, values stay consecutive",
			flux: func() flux.Flux[int] { return flux.Interval(10 * ms).Take(3) },
			onNext: func(v int) error {
				if v == 0 {
					time.Sleep(25 * ms) // the downstream's own time, under test
				}
				return nil
			},
			want: []at[int]{{0, 10 * ms}, {1, 35 * ms}, {2, 40 * ms}}},
		{name: "period 0", flux: func() flux.Flux[int] { return flux.Interval(0) }, wantErr: flux.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := subscribeTimed(t.Context(), c.limit, c.flux(), c.onNext)
				require.Equal(t, c.want, got)
				requireEnd(t, err, c.wantErr)
			})
		})
	}
}

func errorIf(cond bool) error {
	if cond {
		return errBoom
	}
	return nil
}

func TestTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got, err := collectTimed(t.Context(), flux.Timer(time.Hour))
		require.NoError(t, err)
		require.Equal(t, []at[int]{{0, time.Hour}}, got)

		got, err = collectTimed(t.Context(), flux.Timer(0))
		require.NoError(t, err)
		require.Equal(t, []at[int]{{0, 0}}, got)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		got, err = collectTimed(ctx, flux.Timer(time.Hour))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Empty(t, got)
		require.Equal(t, time.Minute, time.Since(start), "the wait is cut short by ctx")

		err = flux.Timer(time.Second).Subscribe(t.Context(), func(int) error { return errBoom })
		require.ErrorIs(t, err, errBoom)

		_, err = flux.Collect(t.Context(), flux.Timer(-1))
		require.ErrorIs(t, err, flux.ErrInvalidArgument)
	})
}

func TestDelayElements(t *testing.T) {
	cases := []struct {
		name    string
		src     flux.Flux[int]
		limit   time.Duration
		want    []at[int]
		wantErr error
		end     time.Duration // when the subscription returns
		lost    []int         // items given to the discard hook
	}{
		{name: "values", src: flux.Just(1, 2, 3),
			want: []at[int]{{1, 10 * ms}, {2, 20 * ms}, {3, 30 * ms}}, end: 30 * ms},
		{name: "empty is not delayed", src: flux.Empty[int](), end: 0},
		{name: "an immediate error is not delayed", src: flux.Error[int](errBoom), wantErr: errBoom, end: 0},
		{name: "error after the delayed items", src: paced(errBoom, step{1, 0}, step{2, 0}),
			want: []at[int]{{1, 10 * ms}, {2, 20 * ms}}, wantErr: errBoom, end: 20 * ms},
		{name: "delay counts from each arrival", src: paced(nil, step{1, 0}, step{2, 50 * ms}),
			want: []at[int]{{1, 10 * ms}, {2, 60 * ms}}, end: 60 * ms},
		{name: "cancelled while an item waits", src: flux.Just(1, 2, 3), limit: 15 * ms,
			want: []at[int]{{1, 10 * ms}}, wantErr: context.DeadlineExceeded, end: 15 * ms, lost: []int{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var lost discarded[int]
				requireTimed(t, t.Context(), c.limit, watch(&lost, c.src.DelayElements(10*ms)), nil, c.want, c.wantErr, c.end)
				require.Equal(t, c.lost, lost.values())
				lost.allBecause(t, context.DeadlineExceeded)
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		err := flux.Just(1, 2).DelayElements(ms).Subscribe(t.Context(), func(int) error { return errBoom })
		require.ErrorIs(t, err, errBoom)
		got, err := flux.Collect(t.Context(), flux.Just(1).DelayElements(0))
		require.NoError(t, err)
		require.Equal(t, []int{1}, got)
		_, err = flux.Collect(t.Context(), flux.Just(1).DelayElements(-1))
		require.ErrorIs(t, err, flux.ErrInvalidArgument)
	})
}

func ExampleInterval() {
	ticks, err := flux.Collect(context.Background(), flux.Interval(time.Millisecond).Take(3))
	fmt.Println(ticks, err)
	// Output: [0 1 2] <nil>
}

func ExampleTimer() {
	got, err := flux.Collect(context.Background(), flux.Timer(time.Millisecond))
	fmt.Println(got, err)
	// Output: [0] <nil>
}

func ExampleFlux_DelayElements() {
	start := time.Now()
	got, err := flux.Collect(context.Background(), flux.Just("a", "b").DelayElements(time.Millisecond))
	fmt.Println(got, err, time.Since(start) >= 2*time.Millisecond)
	// Output: [a b] <nil> true
}

// timeShapes are the time operators over an int source, as Flux[int].
var timeShapes = map[string]func(flux.Flux[int]) flux.Flux[int]{
	"Interval": func(flux.Flux[int]) flux.Flux[int] { return flux.Interval(ms).Take(5) },
	"Timer": func(src flux.Flux[int]) flux.Flux[int] {
		return flux.ConcatMap(src, func(int) flux.Flux[int] { return flux.Timer(ms) })
	},
	"DelayElements": func(src flux.Flux[int]) flux.Flux[int] { return src.DelayElements(ms) },
	"Timeout":       func(src flux.Flux[int]) flux.Flux[int] { return src.Timeout(10 * ms) },
	"TimeoutTo":     func(src flux.Flux[int]) flux.Flux[int] { return src.TimeoutTo(ms/2, flux.Just(7, 8)) },
	"Sample":        func(src flux.Flux[int]) flux.Flux[int] { return src.Sample(ms) },
	"BufferTimeout": func(src flux.Flux[int]) flux.Flux[int] {
		return flux.ConcatMap(flux.BufferTimeout(src, 2, 3*ms), func(b []int) flux.Flux[int] { return flux.FromSlice(b) })
	},
	"Window":        func(src flux.Flux[int]) flux.Flux[int] { return flat(flux.Window(src, 2)) },
	"WindowTimeout": func(src flux.Flux[int]) flux.Flux[int] { return flat(flux.WindowTimeout(src, 2, 3*ms)) },
	"Window in FlatMap": func(src flux.Flux[int]) flux.Flux[int] {
		return flux.FlatMap(flux.Window(src, 2), func(w flux.Flux[int]) flux.Flux[int] { return w }, 2)
	},
	"RetryWhen": func(src flux.Flux[int]) flux.Flux[int] {
		return src.RetryWhen(flux.RetrySpec{MaxAttempts: 2, BackOff: constant(ms)})
	},
}

// bubbled counts the goroutines of synctest bubbles, read from their stack
// headers: those of the running test (this package's tests are not
// parallel), whatever goroutines outside start or end meanwhile (an
// earlier test's timer firing).
func bubbled() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for line := range bytes.Lines(buf) {
		if bytes.HasPrefix(line, []byte("goroutine ")) && bytes.Contains(line, []byte("synctest bubble")) {
			n++
		}
	}
	return n
}

// No goroutine or timer of a time operator outlives its subscription, on
// any exit path: once Subscribe returned and the bubble settled, there
// are no more goroutines than before it.
func TestTimeOperatorsJoinOnEveryExit(t *testing.T) {
	var steps []step
	for i := range 5 {
		steps = append(steps, step{i, time.Duration(i+1) * ms})
	}
	paths := []struct {
		name   string
		src    flux.Flux[int]
		after  func(flux.Flux[int]) flux.Flux[int]
		limit  time.Duration
		onNext func(int) error
	}{
		{name: "complete", src: paced(nil, steps...)},
		{name: "upstream error", src: paced(errBoom, steps...)},
		{name: "downstream error", src: paced(nil, steps...), onNext: func(v int) error { return errorIf(v >= 1) }},
		{name: "take", src: paced(errHang, steps...), after: func(f flux.Flux[int]) flux.Flux[int] { return f.Take(1) }},
		{name: "ctx ends", src: paced(errHang, steps...), limit: 2*ms + ms/2},
	}
	for name, shape := range timeShapes {
		for _, p := range paths {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := shape(p.src)
					if p.after != nil {
						f = p.after(f)
					}
					before := bubbled()
					got, err := subscribeTimed(t.Context(), p.limit, f, p.onNext)
					synctest.Wait()
					require.Equal(t, before, bubbled(), "goroutines left after %v, %v", values(got), err)
				})
			})
		}
	}
}

// The time operators across asynchronous boundaries: items delivered on a
// scheduler's goroutines, a timeout cancelling an upstream that waits on
// one, windows drained on workers.
func TestTimeOperatorsOverSchedulers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel("time", 2)
		require.NoError(t, err)
		defer func() { require.NoError(t, s.DisposeGracefully(t.Context())) }()

		batches, err := flux.Collect(t.Context(), flux.BufferTimeout(flux.Interval(ms).Take(7).PublishOn(s, 2), 3, 10*ms))
		require.NoError(t, err)
		require.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}, {6}}, batches)

		start := time.Now()
		_, err = flux.Collect(t.Context(), never.PublishOn(s, 2).Timeout(5*ms))
		require.ErrorIs(t, err, flux.ErrTimeout)
		require.Equal(t, 5*ms, time.Since(start))

		windows, err := flux.Collect(t.Context(), flux.FlatMap(flux.WindowTimeout(flux.Range(0, 9), 3, ms),
			func(w flux.Flux[int]) flux.Flux[[]int] { return flux.Reduce(w.PublishOn(s, 2), []int(nil), appendInt) }, 3))
		require.NoError(t, err)
		require.ElementsMatch(t, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}, windows)

		sampled, err := flux.Collect(t.Context(), paced(nil, step{1, ms}, step{2, 2 * ms}, step{3, 12 * ms}).Sample(10*ms).PublishOn(s, 1))
		require.NoError(t, err)
		require.Equal(t, []int{2, 3}, sampled)
	})
}
