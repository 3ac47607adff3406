package flux_test

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

type keyed struct {
	k string
	v int
}

// GroupByKey's cases, translated from reactor-core FluxGroupByTest.
func TestGroupByKey(t *testing.T) {
	leakFree(t)
	parity := func(v int) string {
		if v%2 == 0 {
			return "even"
		}
		return "odd"
	}
	tag := func(g flux.KeyedFlux[string, int]) flux.Flux[keyed] {
		return flux.Map(g.Flux, func(v int) keyed { return keyed{g.Key, v} })
	}
	// FluxGroupByTest.normal: groups opened as keys appear, each in order.
	testkit.Verify(t, flux.ConcatMap(flux.GroupByKey(flux.Range(1, 6), parity, 2), tag)).
		ExpectNext(keyed{"odd", 1}, keyed{"odd", 3}, keyed{"odd", 5}, keyed{"even", 2}, keyed{"even", 4}, keyed{"even", 6}).
		ExpectComplete().VerifyT()
	// FluxGroupByTest.oneGroupLongMerge: one key, many items.
	testkit.Verify(t, flux.FlatMap(flux.GroupByKey(flux.Range(0, 1000), func(int) string { return "one" }, 1), tag, 1)).
		ExpectNextCount(1000).ExpectComplete().VerifyT()
	// FluxGroupByTest.twoGroupsLongAsyncMergeHidden, the dispatcher's shape:
	// many keys, each group on a scheduler, order kept per key.
	s := newParallel(t, 2)
	var mu sync.Mutex
	perKey := map[string][]int{}
	f := flux.FlatMap(flux.GroupByKey(flux.Range(0, 2000), func(v int) string { return string(rune('a' + v%7)) }, 7),
		func(g flux.KeyedFlux[string, int]) flux.Flux[keyed] {
			return flux.ConcatMap(g.PublishOn(s, 4), func(v int) flux.Flux[keyed] { return flux.Just(keyed{g.Key, v}) })
		}, 7)
	require.NoError(t, f.Subscribe(t.Context(), func(kv keyed) error {
		mu.Lock()
		defer mu.Unlock()
		perKey[kv.k] = append(perKey[kv.k], kv.v)
		return nil
	}))
	require.Len(t, perKey, 7)
	for k, vs := range perKey {
		require.True(t, sort.IntsAreSorted(vs), k)
		require.Len(t, vs, 2000/7+map[bool]int{true: 1}[int(k[0]-'a') < 2000%7], k)
	}
	// Invalid arguments.
	testkit.Verify(t, flux.GroupByKey[int, string](flux.Just(1), nil, 1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.GroupByKey(flux.Just(1), parity, 0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	requirePanicError(t, flux.GroupByKey(flux.Just(1), func(int) string { panic("boom") }, 1))
}

// More live groups than maxGroups: the item that would open one is
// discarded and the flow fails with ErrTooManyGroups naming its key.
func TestGroupByKeyTooManyGroups(t *testing.T) {
	var d discarded[int]
	f := flux.ConcatMap(flux.GroupByKey(flux.Just(1, 2, 3, 1), func(v int) string { return strings.Repeat("k", v) }, 2),
		func(g flux.KeyedFlux[string, int]) flux.Flux[int] { return g.Flux })
	_, err := flux.Collect(t.Context(), watch(&d, f))
	require.ErrorIs(t, err, flux.ErrTooManyGroups)
	require.ErrorContains(t, err, `"kkk"`)
	require.Contains(t, d.values(), 3)
}

// A group cancelled by its subscriber frees its place: a new key takes it,
// and its own key opens a new group, as in Reactor (the key space is the
// live groups, not the keys seen).
func TestGroupByKeyReusesCancelledGroups(t *testing.T) {
	f := flux.ConcatMap(flux.GroupByKey(flux.FromSlice(strings.Split("a b a c d a", " ")), func(s string) string { return s }, 1),
		func(g flux.KeyedFlux[string, string]) flux.Flux[string] {
			return flux.Map(g.Take(1), func(s string) string { return g.Key + ":" + s })
		})
	testkit.Verify(t, f).ExpectNext("a:a", "b:b", "a:a", "c:c", "d:d", "a:a").ExpectComplete().VerifyT()
}

// The stall check covers keyed groups, and names the key.
func TestGroupByKeyStall(t *testing.T) {
	f := flux.ConcatMap(flux.GroupByKey(flux.Range(0, 10), func(v int) string { return map[bool]string{true: "even", false: "odd"}[v%2 == 0] }, 2,
		flux.WithGroupBuffer(2), flux.WithStallBuffer(0)),
		func(g flux.KeyedFlux[string, int]) flux.Flux[int] { return g.Flux })
	_, err := flux.Collect(t.Context(), f)
	require.ErrorIs(t, err, flux.ErrStalled)
	require.ErrorContains(t, err, "group odd is full")
}
