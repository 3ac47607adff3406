package flux_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// opCase is one Reactor case of an operator over ints, translated: the
// items and the end expected, and what the discard hook for ints must be
// given (the items, in order, and, when why is set, the reason of each).
type opCase[T any] struct {
	name    string
	f       flux.Flux[T]
	want    []T
	wantErr error
	dropped []int
	why     error
}

func (c opCase[T]) check(t *testing.T) {
	t.Helper()
	var d discarded[int]
	got, err := flux.Collect(t.Context(), watch(&d, c.f))
	requireErr(t, err, c.wantErr)
	require.Equal(t, c.want, got, "items")
	require.Equal(t, c.dropped, d.values(), "discarded")
	if c.why != nil {
		for _, why := range d.reasons() {
			requireErr(t, why, c.why)
		}
	}
}

// errPanic stands for "an error carrying *PanicError" in the cases.
var errPanic = errors.New("panic")

// requireErr checks an end or a reason: none if want is nil, one carrying
// *PanicError if want is errPanic, else one that is want.
func requireErr(t *testing.T, err, want error) {
	t.Helper()
	if want == errPanic {
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		return
	}
	requireEnd(t, err, want)
}

func (d *discarded[T]) reasons() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.why...)
}

func runCases[T any](t *testing.T, cases []opCase[T]) {
	t.Helper()
	leakFree(t)
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

func isEqual(s string) func(string) bool { return func(v string) bool { return v == s } }

// Reactor's FluxTakeWhileTest and FluxSkipWhileTest cases (the backpressured
// variants have no counterpart: there is no request(n)), with the items
// they drop.
func TestTakeWhileSkipWhile(t *testing.T) {
	panicky := func(int) bool { panic("forced failure") }
	runCases(t, []opCase[int]{
		{name: "TakeWhile.takeAll", f: flux.Range(1, 5).TakeWhile(func(int) bool { return true }), want: []int{1, 2, 3, 4, 5}},
		{name: "TakeWhile.takeSome", f: flux.Range(1, 5).TakeWhile(func(v int) bool { return v < 4 }),
			want: []int{1, 2, 3}, dropped: []int{4}, why: flux.ErrFiltered},
		{name: "TakeWhile.takeNone", f: flux.Range(1, 5).TakeWhile(func(int) bool { return false }),
			dropped: []int{1}, why: flux.ErrFiltered},
		{name: "TakeWhile.predicateThrows", f: flux.Range(1, 5).TakeWhile(panicky), wantErr: errPanic, dropped: []int{1}, why: errPanic},
		{name: "TakeWhile.predicateNull", f: flux.Range(1, 5).TakeWhile(nil), wantErr: flux.ErrInvalidArgument},
		{name: "TakeWhile cancels an endless source", f: endless.TakeWhile(func(v int) bool { return v < 3 }),
			want: []int{0, 1, 2}, dropped: []int{3}},
		{name: "TakeWhile passes the error", f: failing.TakeWhile(func(int) bool { return true }),
			want: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, wantErr: errBoom},
		{name: "SkipWhile.skipNone", f: flux.Range(1, 5).SkipWhile(func(int) bool { return false }), want: []int{1, 2, 3, 4, 5}},
		{name: "SkipWhile.skipSome", f: flux.Range(1, 5).SkipWhile(func(v int) bool { return v < 3 }),
			want: []int{3, 4, 5}, dropped: []int{1, 2}, why: flux.ErrSkipped},
		{name: "SkipWhile.skipAll", f: flux.Range(1, 5).SkipWhile(func(int) bool { return true }),
			dropped: []int{1, 2, 3, 4, 5}, why: flux.ErrSkipped},
		{name: "SkipWhile.predicateThrows", f: flux.Range(1, 5).SkipWhile(panicky), wantErr: errPanic, dropped: []int{1}, why: errPanic},
		{name: "SkipWhile.predicateNull", f: flux.Range(1, 5).SkipWhile(nil), wantErr: flux.ErrInvalidArgument},
		// conditionalOptimization: one item requested at a time.
		{name: "SkipWhile.conditionalOptimization", f: flux.FlatMap(flux.Range(1, 5).SkipWhile(func(v int) bool { return v < 2 }),
			func(v int) flux.Flux[int] { return flux.Just(v) }, 1), want: []int{2, 3, 4, 5}, dropped: []int{1}},
		// The predicate is not called once it said false.
		{name: "SkipWhile stops asking", f: flux.Just(1, 5, 1).SkipWhile(func(v int) bool { return v < 3 }),
			want: []int{5, 1}, dropped: []int{1}},
	})
	runCases(t, []opCase[string]{
		{name: "TakeWhile.aFluxCanBeLimitedWhile", f: flux.Just("test", "test2", "test3").TakeWhile(isEqual("test")), want: []string{"test"}},
		{name: "SkipWhile.aFluxCanBeSkippedWhile", f: flux.Just("test", "test2", "test3").SkipWhile(isEqual("test")), want: []string{"test2", "test3"}},
	})
}

// Reactor's FluxTakeLastTest and FluxSkipLastTest cases over range(1, 10),
// with what is held and dropped.
func TestTakeLastSkipLast(t *testing.T) {
	r := flux.Range(1, 10)
	runCases(t, []opCase[int]{
		{name: "TakeLast.takeNone", f: r.TakeLast(0), dropped: seqFrom(1, 10), why: flux.ErrSkipped},
		{name: "TakeLast.takeOne", f: r.TakeLast(1), want: []int{10}, dropped: seqFrom(1, 9), why: flux.ErrSkipped},
		{name: "TakeLast.takeSome", f: r.TakeLast(5), want: []int{6, 7, 8, 9, 10}, dropped: seqFrom(1, 5), why: flux.ErrSkipped},
		{name: "TakeLast.takeAll", f: r.TakeLast(10), want: seqFrom(1, 10)},
		{name: "TakeLast more than there are", f: r.TakeLast(20), want: seqFrom(1, 10)},
		{name: "TakeLast.negativeNumber", f: r.TakeLast(-1), wantErr: flux.ErrInvalidArgument},
		{name: "TakeLast on an error discards the window", f: failing.TakeLast(3),
			wantErr: errBoom, dropped: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "TakeLast, the downstream stops early", f: r.TakeLast(4).Take(2), want: []int{7, 8},
			dropped: []int{1, 2, 3, 4, 5, 6, 9, 10}},
		{name: "TakeLast of empty", f: flux.Empty[int]().TakeLast(3)},
		{name: "SkipLast.skipNone", f: r.SkipLast(0), want: seqFrom(1, 10)},
		{name: "SkipLast.skipSome", f: r.SkipLast(3), want: seqFrom(1, 7), dropped: []int{8, 9, 10}, why: flux.ErrSkipped},
		{name: "SkipLast.skipAll", f: r.SkipLast(20), dropped: seqFrom(1, 10), why: flux.ErrSkipped},
		{name: "SkipLast.negativeNumber", f: r.SkipLast(-1), wantErr: flux.ErrInvalidArgument},
		{name: "SkipLast on an error discards what it held", f: failing.SkipLast(3),
			want: seqFrom(0, 7), wantErr: errBoom, dropped: []int{7, 8, 9}, why: errBoom},
		{name: "SkipLast cancelled discards what it held", f: endless.SkipLast(2).Take(3),
			want: []int{0, 1, 2}, dropped: []int{3, 4}, why: flux.ErrCancelled},
	})
}

func seqFrom(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// TakeLast and SkipLast split any sequence between them, and every item is
// either delivered or discarded, once.
func TestTakeLastSkipLastProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		vs := rapid.SliceOf(rapid.Int()).Draw(rt, "items")
		n := rapid.IntRange(0, 12).Draw(rt, "n")
		var dt, ds discarded[int]
		last, err := flux.Collect(context.Background(), watch(&dt, flux.FromSlice(vs).TakeLast(n)))
		require.NoError(rt, err)
		first, err := flux.Collect(context.Background(), watch(&ds, flux.FromSlice(vs).SkipLast(n)))
		require.NoError(rt, err)
		require.Equal(rt, nonNil(vs), append(nonNil(first), last...))
		require.Equal(rt, nonNil(first), nonNil(dt.values()), "TakeLast drops what SkipLast keeps")
		require.Equal(rt, nonNil(last), nonNil(ds.values()), "SkipLast drops what TakeLast keeps")
	})
}

// Reactor's FluxBufferPredicateTest cases (the sink-driven ones over the
// same items), with what is dropped.
func TestBufferUntilWhile(t *testing.T) {
	third := func(v int) bool { return v%3 == 0 }
	notThird := func(v int) bool { return v%3 != 0 }
	upTo8 := flux.Range(1, 8)
	runCases(t, []opCase[[]int]{
		{name: "normalUntil", f: flux.BufferUntil(upTo8, third, false), want: [][]int{{1, 2, 3}, {4, 5, 6}, {7, 8}}},
		{name: "normalUntilOther (cutBefore)", f: flux.BufferUntil(upTo8, third, true), want: [][]int{{1, 2}, {3, 4, 5}, {6, 7, 8}}},
		{name: "onCompletionBeforeLastBoundaryBufferEmitted until", f: flux.BufferUntil(flux.Just(1, 2), func(v int) bool { return v >= 3 }, false),
			want: [][]int{{1, 2}}},
		{name: "onCompletionBeforeLastBoundaryBufferEmitted cutBefore", f: flux.BufferUntil(flux.Just(1, 2), func(v int) bool { return v >= 3 }, true),
			want: [][]int{{1, 2}}},
		{name: "onCompletionBeforeLastBoundaryBufferEmitted while", f: flux.BufferWhile(flux.Just(1, 2), func(v int) bool { return v < 3 }),
			want: [][]int{{1, 2}}},
		{name: "mainErrorUntil", f: flux.BufferUntil(flux.Concat(flux.Range(1, 5), flux.Error[int](errBoom)), third, false),
			want: [][]int{{1, 2, 3}}, wantErr: errBoom, dropped: []int{4, 5}, why: errBoom},
		{name: "predicateErrorUntil", f: flux.BufferUntil(upTo8, func(v int) bool {
			if v == 5 {
				panic("predicate failure")
			}
			return third(v)
		}, false), want: [][]int{{1, 2, 3}}, wantErr: errPanic, dropped: []int{5, 4}, why: errPanic},
		{name: "mainErrorUntilOther", f: flux.BufferUntil(flux.Concat(flux.Range(1, 4), flux.Error[int](errBoom)), third, true),
			want: [][]int{{1, 2}}, wantErr: errBoom, dropped: []int{3, 4}, why: errBoom},
		{name: "normalWhile", f: flux.BufferWhile(upTo8, notThird), want: [][]int{{1, 2}, {4, 5}, {7, 8}},
			dropped: []int{3, 6}, why: flux.ErrFiltered},
		{name: "normalWhileDoesntInitiallyMatch", f: flux.BufferWhile(flux.Range(1, 9), third), want: [][]int{{3}, {6}, {9}},
			dropped: []int{1, 2, 4, 5, 7, 8}, why: flux.ErrFiltered},
		{name: "normalWhileDoesntMatch", f: flux.BufferWhile(flux.Just(1, 2, 3, 4, 1, 2, 3, 4), func(v int) bool { return v > 4 }),
			dropped: []int{1, 2, 3, 4, 1, 2, 3, 4}, why: flux.ErrFiltered},
		{name: "mainErrorWhile", f: flux.BufferWhile(flux.Concat(flux.Range(1, 5), flux.Error[int](errBoom)), third),
			want: [][]int{{3}}, wantErr: errBoom, dropped: []int{1, 2, 4, 5}},
		{name: "discardOnError", f: flux.BufferUntil(flux.Concat(flux.Just(1, 2, 3), flux.Error[int](errBoom)), func(int) bool { return false }, false),
			wantErr: errBoom, dropped: []int{1, 2, 3}, why: errBoom},
		{name: "nil predicate until", f: flux.BufferUntil(upTo8, nil, false), wantErr: flux.ErrInvalidArgument},
		{name: "nil predicate while", f: flux.BufferWhile(upTo8, nil), wantErr: flux.ErrInvalidArgument},
		{name: "empty", f: flux.BufferUntil(flux.Empty[int](), third, false)},
	})
	// discardOnCancel: the partial buffer of a flow whose ctx ends.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	src := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for v := range 3 {
			if err := s.Next(v + 1); err != nil {
				return err
			}
		}
		cancel()
		<-ctx.Done()
		return context.Cause(ctx)
	})
	var d discarded[int]
	err := watch(&d, flux.BufferUntil(src, func(int) bool { return false }, false)).
		Subscribe(ctx, func([]int) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int{1, 2, 3}, d.values())
	d.allBecause(t, context.Canceled)
}

// A cut-before slice whose emission the downstream refuses: the item
// that would start the next slice is discarded too.
func TestBufferUntilCutBeforeDownstreamFails(t *testing.T) {
	leakFree(t)
	var d discarded[int]
	err := watch(&d, flux.BufferUntil(flux.Range(1, 5), func(v int) bool { return v == 3 }, true)).
		Subscribe(t.Context(), func([]int) error { return errStop })
	require.ErrorIs(t, err, errStop)
	require.Equal(t, []int{3}, d.values())
}

func TestStartWithConcatWithMergeWith(t *testing.T) {
	leakFree(t)
	// FluxStartWithTest.dontBreakFluxArrayConcatMap
	testkit.Verify(t, flux.ConcatMap(flux.Just(1, 2), func(v int) flux.Flux[int] { return flux.Just(v) }).StartWith(3)).
		ExpectNext(3, 1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(3).StartWith(1, 2)).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(3).StartWith()).ExpectNext(3).ExpectComplete().VerifyT()
	// FluxStartWithTest.noStackOverflow: 5000 nested StartWith.
	result := flux.Just(1)
	for range 5000 {
		result = result.StartWith(1)
	}
	testkit.Verify(t, result.Count().Flux()).ExpectNext(5001).ExpectComplete().VerifyT()
	// FluxConcatWithTest / FluxMergeWithTest shapes.
	testkit.Verify(t, flux.Just(1, 2).ConcatWith(flux.Just(3, 4))).ExpectNext(1, 2, 3, 4).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Error[int](errBoom).ConcatWith(flux.Just(3))).ExpectErrorIs(errBoom).VerifyT()
	got, err := flux.Collect(t.Context(), flux.Just(0, 1, 2).MergeWith(flux.Just(1000, 1001)))
	require.NoError(t, err)
	perSourceOrder(t, []int{3, 2}, got)
	testkit.Verify(t, flux.Just(1).MergeWith(flux.Error[int](errBoom))).
		ThenConsumeWhile(func(v int) bool { return v == 1 }).ExpectErrorIs(errBoom).VerifyT()
}
