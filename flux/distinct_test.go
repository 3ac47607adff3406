package flux_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

func TestDistinct(t *testing.T) {
	testkit.Verify(t, flux.Distinct(flux.Just(1, 2, 1, 3, 2, 4))).ExpectNext(1, 2, 3, 4).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Distinct(flux.Empty[int]())).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Distinct(failing)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Distinct(endless).Take(3)).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctBy(flux.Just("a", "B", "A", "b", "c"), strings.ToLower)).
		ExpectNext("a", "B", "c").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctBy[int, int](flux.Just(1), nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	requirePanicError(t, flux.DistinctBy(flux.Just(1), boom[int]))
	// Each subscription has its own set.
	f := flux.Distinct(flux.Just(1, 1))
	testkit.Verify(t, f).ExpectNext(1).ExpectComplete().VerifyT()
	testkit.Verify(t, f).ExpectNext(1).ExpectComplete().VerifyT()
}

func TestDistinctUntilChanged(t *testing.T) {
	testkit.Verify(t, flux.DistinctUntilChanged(flux.Just(1, 1, 2, 2, 1, 3, 3))).ExpectNext(1, 2, 1, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctUntilChanged(flux.Empty[int]())).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctUntilChanged(flux.Concat(flux.Just(0, 0), failing))).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	// The zero value is an item like another, first or not.
	testkit.Verify(t, flux.DistinctUntilChanged(flux.Just(0, 0, 1))).ExpectNext(0, 1).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctUntilChangedBy(flux.Just("a", "A", "b", "a"), strings.ToLower)).
		ExpectNext("a", "b", "a").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.DistinctUntilChangedBy[int, int](flux.Just(1), nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	requirePanicError(t, flux.DistinctUntilChangedBy(flux.Just(1), boom[int]))
}

// The items filtered out go to the discard hook with ErrDuplicate; the
// others are delivered.
func TestDistinctDiscards(t *testing.T) {
	for name, op := range map[string]func(flux.Flux[int]) flux.Flux[int]{
		"Distinct":             flux.Distinct[int],
		"DistinctUntilChanged": flux.DistinctUntilChanged[int],
	} {
		t.Run(name, func(t *testing.T) {
			var dropped []int
			f := flux.DoOnDiscard(op(flux.Just(5, 5, 6, 6, 5)), func(v int, reason error) {
				require.ErrorIs(t, reason, flux.ErrDuplicate)
				dropped = append(dropped, v)
			})
			got, err := flux.Collect(t.Context(), f)
			require.NoError(t, err)
			require.Len(t, append(got, dropped...), 5)
		})
	}
}

// distinctModel and runsModel are the plain-slice definitions.
func distinctModel[T comparable](vs []T) []T {
	seen := map[T]bool{}
	out := []T{}
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func runsModel[T comparable](vs []T) []T {
	out := []T{}
	for i, v := range vs {
		if i == 0 || v != vs[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Distinct equals a set filter, DistinctUntilChanged the run heads, with
// and without a key.
func TestDistinctProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		vs := rapid.SliceOf(rapid.IntRange(-5, 5)).Draw(rt, "items")
		mod := rapid.IntRange(1, 4).Draw(rt, "key modulus")
		key := func(v int) int { return ((v % mod) + mod) % mod }
		keys := make([]int, len(vs))
		for i, v := range vs {
			keys[i] = key(v)
		}
		collects(rt, flux.Distinct(flux.FromSlice(vs)), distinctModel(vs))
		collects(rt, flux.DistinctUntilChanged(flux.FromSlice(vs)), runsModel(vs))
		collects(rt, flux.Map(flux.DistinctBy(flux.FromSlice(vs), key), key), distinctModel(keys))
		collects(rt, flux.Map(flux.DistinctUntilChangedBy(flux.FromSlice(vs), key), key), runsModel(keys))
	})
}

// collects requires f to complete with want.
func collects[T any](t require.TestingT, f flux.Flux[T], want []T) {
	got, err := flux.Collect(context.Background(), f)
	require.NoError(t, err)
	require.Equal(t, nonNil(want), nonNil(got))
}

func FuzzDistinct(f *testing.F) {
	f.Add([]byte{1, 1, 2, 1, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		collects(t, flux.Distinct(flux.FromSlice(data)), distinctModel(data))
		collects(t, flux.DistinctUntilChanged(flux.FromSlice(data)), runsModel(data))
	})
}

func ExampleDistinct() {
	got, err := flux.Collect(context.Background(), flux.Distinct(flux.Just(3, 1, 3, 2, 1)))
	fmt.Println(got, err)
	// Output: [3 1 2] <nil>
}

func ExampleDistinctBy() {
	got, err := flux.Collect(context.Background(), flux.DistinctBy(flux.Just("Go", "rust", "GO", "Rust"), strings.ToLower))
	fmt.Println(got, err)
	// Output: [Go rust] <nil>
}

func ExampleDistinctUntilChanged() {
	got, err := flux.Collect(context.Background(), flux.DistinctUntilChanged(flux.Just(1, 1, 2, 2, 2, 1)))
	fmt.Println(got, err)
	// Output: [1 2 1] <nil>
}

func ExampleDistinctUntilChangedBy() {
	type reading struct {
		sensor string
		value  int
	}
	readings := flux.Just(reading{"a", 1}, reading{"a", 2}, reading{"b", 3}, reading{"a", 4})
	got, err := flux.Collect(context.Background(), flux.DistinctUntilChangedBy(readings, func(r reading) string { return r.sensor }))
	fmt.Println(got, err)
	// Output: [{a 1} {b 3} {a 4}] <nil>
}

// A key of interface type may hold a value the map cannot hash or == cannot
// compare; the runtime's panic is then the key's failure, a *PanicError that
// OnErrorContinue can resume, not a panic out of Subscribe.
func TestDistinctUnhashableKeyIsPanicError(t *testing.T) {
	identity := func(v any) any { return v }
	cases := []struct {
		name      string
		op        func(flux.Flux[any]) flux.Flux[any]
		in        []any // fails on the item at bad
		bad       int
		resumedIn []any
		resumed   []any
	}{
		{
			name: "DistinctBy",
			op:   func(f flux.Flux[any]) flux.Flux[any] { return flux.DistinctBy(f, identity) },
			in:   []any{1, []int{2}, 3}, bad: 1,
			resumedIn: []any{1, []int{2}, 1, 3}, resumed: []any{1, 3},
		},
		{
			name: "DistinctUntilChangedBy",
			op:   func(f flux.Flux[any]) flux.Flux[any] { return flux.DistinctUntilChangedBy(f, identity) },
			in:   []any{1, []int{2}, []int{3}, 3}, bad: 2,
			// []int{3} is skipped and not kept as the last key: 3 follows []int{2}.
			resumedIn: []any{1, []int{2}, []int{3}, 3, 3}, resumed: []any{1, []int{2}, 3},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []any
			var err error
			require.NotPanics(t, func() { got, err = flux.Collect(context.Background(), c.op(flux.Just(c.in...))) })
			var pe *flux.PanicError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, c.in[:c.bad], got)

			var skipped []any
			resumed := flux.OnErrorContinue(c.op(flux.Just(c.resumedIn...)), func(_ error, v any) { skipped = append(skipped, v) })
			got, err = flux.Collect(context.Background(), resumed)
			require.NoError(t, err)
			require.Equal(t, c.resumed, got)
			require.Len(t, skipped, 1)
		})
	}
}
