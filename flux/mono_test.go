package flux_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// monoCase is one of Reactor's Mono cases: the Mono and what it must give.
type monoCase struct {
	name    string // reactor-core test class and method it translates
	m       flux.Mono[int]
	want    []int // nil: empty
	wantErr error
	panics  bool
}

func (c monoCase) check(t *testing.T) {
	t.Helper()
	got, err := flux.Collect(t.Context(), c.m.Flux())
	switch {
	case c.panics:
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe, c.name)
	case c.wantErr != nil:
		require.ErrorIs(t, err, c.wantErr, c.name)
	default:
		require.NoError(t, err, c.name)
	}
	require.Equal(t, c.want, got, c.name)
}

func TestMono(t *testing.T) {
	leakFree(t)
	plus := func(a, b int) int { return a + b }
	for _, c := range []monoCase{
		{name: "MonoJustTest.normal", m: flux.MonoJust(1), want: []int{1}},
		{name: "MonoEmptyTest.normal", m: flux.MonoEmpty[int]()},
		{name: "MonoErrorTest.normal", m: flux.MonoError[int](errBoom), wantErr: errBoom},
		{name: "MonoErrorTest nil error", m: flux.MonoError[int](nil), wantErr: flux.ErrInvalidArgument},
		{name: "zero Mono is empty", m: flux.Mono[int]{}},
		{name: "MonoCallableTest.normal", m: flux.MonoFromFunc(func() (int, error) { return 1, nil }), want: []int{1}},
		{name: "MonoCallableTest.callableThrows", m: flux.MonoFromFunc(func() (int, error) { return 0, errBoom }), wantErr: errBoom},
		{name: "MonoCallableTest panic", m: flux.MonoFromFunc(func() (int, error) { panic("boom") }), panics: true},
		{name: "MonoCallableTest nil", m: flux.MonoFromFunc[int](nil), wantErr: flux.ErrInvalidArgument},
		{name: "MonoMapTest.normal", m: flux.MonoMap(flux.MonoJust(1), func(v int) int { return v + 1 }), want: []int{2}},
		{name: "MonoMapTest empty", m: flux.MonoMap(flux.MonoEmpty[int](), func(v int) int { return v + 1 })},
		{name: "MonoMapTest.mapperThrows", m: flux.MonoMap(flux.MonoJust(1), boom[int]), panics: true},
		{name: "MonoFlatMapTest.normal", m: flux.MonoFlatMap(flux.MonoJust(1), func(v int) flux.Mono[int] { return flux.MonoJust(v * 10) }), want: []int{10}},
		{name: "MonoFlatMapTest.inner empty", m: flux.MonoFlatMap(flux.MonoJust(1), func(int) flux.Mono[int] { return flux.MonoEmpty[int]() })},
		{name: "MonoFlatMapTest.error", m: flux.MonoFlatMap(flux.MonoError[int](errBoom), func(v int) flux.Mono[int] { return flux.MonoJust(v) }), wantErr: errBoom},
		{name: "MonoZipTest.normal", m: flux.MonoZip(flux.MonoJust(1), flux.MonoJust(2), plus), want: []int{3}},
		{name: "MonoZipTest.empty first", m: flux.MonoZip(flux.MonoEmpty[int](), flux.MonoJust(2), plus)},
		{name: "MonoZipTest.empty second cancels first", m: flux.MonoZip(never.Next(), flux.MonoEmpty[int](), plus)},
		{name: "MonoZipTest.error cancels other", m: flux.MonoZip(never.Next(), flux.MonoError[int](errBoom), plus), wantErr: errBoom},
		{name: "MonoZipTest.combinator throws", m: flux.MonoZip(flux.MonoJust(1), flux.MonoJust(2), func(int, int) int { panic("boom") }), panics: true},
		{name: "MonoZipTest nil", m: flux.MonoZip[int, int, int](flux.MonoJust(1), flux.MonoJust(2), nil), wantErr: flux.ErrInvalidArgument},
		{name: "MonoThenIgnoreTest.normal", m: flux.Then(flux.Range(0, 3), flux.MonoJust(7)), want: []int{7}},
		{name: "MonoThenIgnoreTest.error", m: flux.Then(failing, flux.MonoJust(7)), wantErr: errBoom},
		{name: "MonoThenIgnoreTest.thenReturn", m: flux.ThenReturn(flux.MonoJust(1).Flux(), 2), want: []int{2}},
		{name: "MonoDefaultIfEmptyTest.nonEmpty", m: flux.MonoJust(2).DefaultIfEmpty(1), want: []int{2}},
		{name: "MonoDefaultIfEmptyTest.empty", m: flux.MonoEmpty[int]().DefaultIfEmpty(1), want: []int{1}},
		{name: "MonoSwitchIfEmpty", m: flux.MonoEmpty[int]().SwitchIfEmpty(flux.MonoJust(3)), want: []int{3}},
		{name: "MonoNextTest.normal", m: flux.Range(1, 5).Next(), want: []int{1}},
		{name: "MonoNextTest.empty", m: flux.Empty[int]().Next()},
		{name: "MonoNextTest.error", m: flux.Error[int](errBoom).Next(), wantErr: errBoom},
		{name: "MonoNextTest.endless", m: endless.Next(), want: []int{0}},
		{name: "MonoTakeLastOneTest.normal", m: flux.Range(1, 10).Last(), want: []int{10}},
		{name: "MonoTakeLastOneTest.empty", m: flux.Empty[int]().Last(), wantErr: flux.ErrNoSuchElement},
		{name: "MonoTakeLastOneTest.error", m: failing.Last(), wantErr: errBoom},
		{name: "MonoSingleTest.normal", m: flux.Just(1).Single(), want: []int{1}},
		{name: "MonoSingleTest.empty", m: flux.Empty[int]().Single(), wantErr: flux.ErrNoSuchElement},
		{name: "MonoSingleTest.multi", m: endless.Single(), wantErr: flux.ErrTooManyElements},
		{name: "MonoElementAtTest.normal", m: flux.Range(1, 10).ElementAt(0), want: []int{1}},
		{name: "MonoElementAtTest.normal2", m: flux.Range(1, 10).ElementAt(9), want: []int{10}},
		{name: "MonoElementAtTest.endless", m: endless.ElementAt(4), want: []int{4}},
		{name: "MonoElementAtTest.beyond", m: flux.Range(1, 10).ElementAt(10), wantErr: flux.ErrNoSuchElement},
		{name: "MonoElementAtTest.negative", m: flux.Range(1, 10).ElementAt(-1), wantErr: flux.ErrInvalidArgument},
		{name: "MonoCountTest.normal", m: flux.Range(1, 10).Count(), want: []int{10}},
		{name: "MonoCountTest.empty", m: flux.Empty[int]().Count(), want: []int{0}},
		{name: "MonoCountTest.error", m: failing.Count(), wantErr: errBoom},
		{name: "MonoRetryTest.exhausted", m: flux.MonoError[int](errBoom).Retry(2), wantErr: errBoom},
		{name: "MonoFilter", m: flux.MonoJust(3).Filter(func(v int) bool { return v > 5 })},
	} {
		c.check(t)
	}
}

// Mono.retry(n) subscribes the callable afresh: reactor-core MonoRetryTest.
func TestMonoRetrySubscribesAgain(t *testing.T) {
	calls := 0
	m := flux.MonoFromFunc(func() (int, error) {
		calls++
		if calls < 3 {
			return 0, errBoom
		}
		return calls, nil
	})
	testkit.Verify(t, m.Retry(2).Flux()).ExpectNext(3).ExpectComplete().VerifyT()
	calls = 0
	testkit.Verify(t, m.Retry(1).Flux()).ExpectErrorIs(errBoom).VerifyT()
}

// Mono.timeout: reactor-core MonoTimeoutTest (noMatch / timeout), on the
// fake clock.
func TestMonoTimeout(t *testing.T) {
	leakFree(t)
	synctest.Test(t, func(t *testing.T) {
		late := flux.Timer(2 * time.Second).Next()
		_, _, err := late.Timeout(time.Second).Block(t.Context())
		require.ErrorIs(t, err, flux.ErrTimeout)
		v, ok, err := flux.Timer(time.Second).Next().Timeout(2 * time.Second).Block(t.Context())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 0, v)
	})
}

// Mono.block: the value, or ok false for an empty Mono, or the error; a ctx
// ending first ends the wait with its cause.
func TestMonoBlock(t *testing.T) {
	leakFree(t)
	v, ok, err := flux.MonoJust("a").Block(t.Context())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", v)
	_, ok, err = flux.MonoEmpty[string]().Block(t.Context())
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = flux.MonoError[string](errBoom).Block(t.Context())
	require.ErrorIs(t, err, errBoom)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, _, err = never.Next().Block(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// A Mono to a Flux and back: MonoFlatMapMany runs the Flux of the value.
func TestMonoFlatMapMany(t *testing.T) {
	f := flux.MonoFlatMapMany(flux.MonoJust("a,b,c"), func(s string) flux.Flux[string] {
		return flux.FromSlice(strings.Split(s, ","))
	})
	testkit.Verify(t, f).ExpectNext("a", "b", "c").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.MonoFlatMapMany(flux.MonoEmpty[string](), func(string) flux.Flux[int] { return flux.Just(1) })).
		ExpectComplete().VerifyT()
}

// The items the Flux-to-Mono operators pull and do not emit go to the
// discard hook: those Last replaced (ErrSuperseded), those ElementAt
// skipped (ErrSkipped), both items of a Single that had two.
func TestMonoDiscards(t *testing.T) {
	cases := []struct {
		name string
		m    func(flux.Flux[int]) flux.Mono[int]
		want []int
		why  error
	}{
		{"Last", flux.Flux[int].Last, []int{0, 1, 2, 3}, flux.ErrSuperseded},
		{"ElementAt", func(f flux.Flux[int]) flux.Mono[int] { return f.ElementAt(3) }, []int{0, 1, 2}, flux.ErrSkipped},
		{"Single", flux.Flux[int].Single, []int{0, 1}, flux.ErrTooManyElements},
		{"IgnoreElements", flux.Flux[int].IgnoreElements, []int{0, 1, 2, 3, 4}, flux.ErrSkipped},
	}
	for _, c := range cases {
		var d discarded[int]
		_, _, err := flux.DoOnDiscard(c.m(flux.Range(0, 5)).Flux(), d.hook).Next().Block(t.Context())
		if c.why == flux.ErrTooManyElements {
			require.ErrorIs(t, err, c.why, c.name)
		} else {
			require.NoError(t, err, c.name)
		}
		require.Equal(t, c.want, d.values(), c.name)
		for _, why := range d.why {
			require.True(t, errors.Is(why, c.why), "%s: %v", c.name, why)
		}
	}
}

// The value of one side of a MonoZip whose other side failed or was empty
// goes to the discard hook (MonoZip discards it, as Reactor's does).
func TestMonoZipDiscards(t *testing.T) {
	for _, c := range []struct {
		name  string
		other flux.Mono[int]
		why   error
	}{
		{"error", flux.MonoError[int](errBoom), errBoom},
		{"empty", flux.MonoEmpty[int](), flux.ErrCancelled},
	} {
		var d discarded[string]
		// The other side ends only once the first one has its value.
		took := make(chan struct{})
		first := flux.MonoMap(flux.MonoJust("kept"), func(s string) string { close(took); return s })
		other := flux.MonoFlatMap(flux.MonoFromFunc(func() (int, error) { <-took; return 0, nil }),
			func(int) flux.Mono[int] { return c.other })
		z := flux.MonoZip(first, other, func(s string, _ int) string { return s })
		_, ok, err := flux.DoOnDiscard(z.Flux(), d.hook).Next().Block(t.Context())
		require.False(t, ok, c.name)
		if c.why == errBoom {
			require.ErrorIs(t, err, errBoom, c.name)
		} else {
			require.NoError(t, err, c.name)
		}
		require.Equal(t, []string{"kept"}, d.values(), c.name)
		require.ErrorIs(t, d.why[0], c.why, c.name)
	}
}
