package flux_test

import (
	"cmp"
	"strings"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

func TestBooleanShortcuts(t *testing.T) {
	leakFree(t)
	even := func(v int) bool { return v%2 == 0 }
	for _, c := range []struct {
		name    string // reactor-core test it translates
		m       flux.Mono[bool]
		want    bool
		wantErr error
	}{
		{name: "MonoHasElementsTest.emptySource", m: flux.Empty[int]().HasElements(), want: false},
		{name: "MonoHasElementsTest.nonEmptySource", m: flux.Range(1, 10).HasElements(), want: true},
		{name: "MonoHasElementsTest.endless cancelled", m: endless.HasElements(), want: true},
		{name: "MonoHasElementsTest.error", m: flux.Error[int](errBoom).HasElements(), wantErr: errBoom},
		{name: "MonoAnyTest.someMatch", m: flux.Range(1, 10).Any(even), want: true},
		{name: "MonoAnyTest.noneMatch", m: flux.Just(1, 3, 5).Any(even), want: false},
		{name: "MonoAnyTest.empty", m: flux.Empty[int]().Any(even), want: false},
		{name: "MonoAnyTest.endless cancelled", m: endless.Any(func(v int) bool { return v == 5 }), want: true},
		{name: "MonoAllTest.allMatch", m: flux.Just(2, 4, 6).Every(even), want: true},
		{name: "MonoAllTest.someMatch", m: flux.Range(1, 10).Every(even), want: false},
		{name: "MonoAllTest.empty", m: flux.Empty[int]().Every(even), want: true},
		{name: "MonoAllTest.endless cancelled", m: endless.Every(func(v int) bool { return v < 5 }), want: false},
		{name: "MonoAllTest.error", m: failing.Every(func(int) bool { return true }), wantErr: errBoom},
		{name: "MonoAnyTest nil predicate", m: flux.Just(1).Any(nil), wantErr: flux.ErrInvalidArgument},
		{name: "MonoAllTest nil predicate", m: flux.Just(1).Every(nil), wantErr: flux.ErrInvalidArgument},
	} {
		v, ok, err := c.m.Block(t.Context())
		if c.wantErr != nil {
			require.ErrorIs(t, err, c.wantErr, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		require.True(t, ok, c.name)
		require.Equal(t, c.want, v, c.name)
	}
	requirePanicError(t, flux.Just(1).Any(func(int) bool { panic("boom") }).Flux())
}

// reactor-core MonoCollectListTest, MonoCollectMapTest,
// FluxCollectSortedTest (collectSortedList) cases.
func TestCollectShortcuts(t *testing.T) {
	leakFree(t)
	words := flux.Just("apple", "bob", "avocado", "banana", "cherry")
	first := func(s string) byte { return s[0] }
	testkit.Verify(t, flux.CollectList(words).Flux()).ExpectNext([]string{"apple", "bob", "avocado", "banana", "cherry"}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CollectList(flux.Empty[int]()).Flux()).ExpectNext([]int{}).ExpectComplete().VerifyT()
	// collectMap: a later item of a key replaces the earlier one.
	testkit.Verify(t, flux.CollectMap(words, first, strings.ToUpper).Flux()).
		ExpectNext(map[byte]string{'a': "AVOCADO", 'b': "BANANA", 'c': "CHERRY"}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CollectMultimap(words, first, strings.ToUpper).Flux()).
		ExpectNext(map[byte][]string{'a': {"APPLE", "AVOCADO"}, 'b': {"BOB", "BANANA"}, 'c': {"CHERRY"}}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CollectSorted(flux.Just(3, 1, 2), cmp.Compare[int]).Flux()).ExpectNext([]int{1, 2, 3}).ExpectComplete().VerifyT()
	// collectSortedList is stable.
	byLen := func(a, b string) int { return cmp.Compare(len(a), len(b)) }
	testkit.Verify(t, flux.CollectSorted(flux.Just("bb", "a", "cc", "d"), byLen).Flux()).
		ExpectNext([]string{"a", "d", "bb", "cc"}).ExpectComplete().VerifyT()
	for _, m := range []flux.Flux[int]{
		flux.MonoMap(flux.CollectMap(failing, func(v int) int { return v }, func(v int) int { return v }), func(m map[int]int) int { return len(m) }).Flux(),
		flux.MonoMap(flux.CollectSorted(failing, cmp.Compare[int]), func(s []int) int { return len(s) }).Flux(),
	} {
		var d discarded[int]
		_, err := flux.Collect(t.Context(), watch(&d, m))
		require.ErrorIs(t, err, errBoom)
		require.Len(t, d.values(), 10, "the items gathered before the error are discarded")
	}
	testkit.Verify(t, flux.CollectMap[int, int, int](flux.Just(1), nil, func(v int) int { return v }).Flux()).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.CollectMultimap[int, int, int](flux.Just(1), func(v int) int { return v }, nil).Flux()).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.CollectSorted(flux.Just(1), nil).Flux()).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	requirePanicError(t, flux.CollectMap(flux.Just(1), func(int) int { panic("boom") }, func(v int) int { return v }).Flux())
}

// HasElements discards the item it pulled to know (MonoHasElements).
func TestHasElementsDiscards(t *testing.T) {
	var d discarded[int]
	v, _, err := flux.DoOnDiscard(flux.Just(7, 8).HasElements().Flux(), d.hook).Next().Block(t.Context())
	require.NoError(t, err)
	require.True(t, v)
	require.Equal(t, []int{7}, d.values())
}
