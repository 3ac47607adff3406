package dispatch

import (
	"strconv"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestKeyTableIsAMap checks the table against a map under random puts,
// removes and lookups, with ids drawn from a small set so that runs of
// probed slots form, wrap around the end and are cut by removals, and from
// ids of one HashCode, so that the table may turn to hashing ids midway;
// after each step every indexed lane's slot points at it and the count
// agrees.
func TestKeyTableIsAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kt := newKeyTable[int]()
		want := map[string]*lane[int]{}
		idGen := rapid.OneOf(
			rapid.Map(rapid.IntRange(0, 120), func(i int) string { return "id-" + strconv.Itoa(i) }),
			rapid.Map(rapid.IntRange(0, 31), sameHashCode),
		)
		for step := range rapid.IntRange(1, 300).Draw(rt, "steps") {
			id := idGen.Draw(rt, "id")
			if l, ok := want[id]; ok && rapid.Bool().Draw(rt, "remove") {
				kt.remove(l)
				delete(want, id)
			} else if !ok {
				l := &lane[int]{key: id, slot: -1}
				_, h := lookUp(kt, id)
				kt.put(l, h)
				want[id] = l
			}
			require.Equal(rt, len(want), kt.n, "step %d", step)
			for id, l := range want {
				got, _ := lookUp(kt, id)
				require.Same(rt, l, got, "step %d: id %q", step, id)
				require.Same(rt, l, kt.slots[l.slot].l, "step %d: id %q's slot", step, id)
			}
			probe := idGen.Draw(rt, "probe")
			if _, ok := want[probe]; !ok {
				got, _ := lookUp(kt, probe)
				require.Nil(rt, got, "step %d: id %q was never put or was removed", step, probe)
			}
			seen := 0
			for l := range kt.lanes() {
				require.Same(rt, want[l.key], l)
				seen++
			}
			require.Equal(rt, len(want), seen)
		}
	})
}

// lookUp is keyLane's look-up: id's lane or nil, and the hash to put a new
// lane of id under.
func lookUp(kt *keyTable[int], id string) (*lane[int], uint64) {
	k := aggregate.NewKey(id)
	h := kt.hash(k)
	l, same := kt.get(id, h)
	if l == nil && same >= keyFlood {
		kt.hashIDs()
		h = kt.hash(k)
	}
	return l, h
}

// sameHashCode returns the i-th of 32 ids of one HashCode: "Aa" and "BB"
// hash alike, and so does any string of five of them.
func sameHashCode(i int) string {
	var b []byte
	for bit := range 5 {
		if i>>bit&1 == 0 {
			b = append(b, "Aa"...)
		} else {
			b = append(b, "BB"...)
		}
	}
	return string(b)
}

// TestKeyTableHashesIDsOnceHashCodesCollide puts ids of one HashCode: the
// table hashes HashCodes until a look-up meets keyFlood lanes of its hash,
// then ids, and every lane stays found; ids of distinct HashCodes never
// turn it.
func TestKeyTableHashesIDsOnceHashCodesCollide(t *testing.T) {
	require.Equal(t, aggregate.HashCode(sameHashCode(0)), aggregate.HashCode(sameHashCode(31)))
	kt := newKeyTable[int]()
	var ls []*lane[int]
	for i := range 32 {
		id := sameHashCode(i)
		l, h := lookUp(kt, id)
		require.Nil(t, l)
		require.Equal(t, i >= keyFlood, kt.byID, "after %d lanes of one HashCode", i)
		ls = append(ls, &lane[int]{key: id, slot: -1})
		kt.put(ls[i], h)
	}
	require.True(t, kt.byID, "32 lanes of one HashCode")
	for _, l := range ls {
		got, _ := lookUp(kt, l.key)
		require.Same(t, l, got)
	}

	kt = newKeyTable[int]()
	for i := range 10_000 {
		id := "account-" + strconv.Itoa(i)
		l, h := lookUp(kt, id)
		require.Nil(t, l)
		kt.put(&lane[int]{key: id, slot: -1}, h)
	}
	require.False(t, kt.byID)
}

// TestKeyTableSameLowBits puts ids whose hashes share their low bits (one
// home slot), then removes them in a random order: the backward shift must
// keep each remaining one reachable.
func TestKeyTableSameLowBits(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kt := newKeyTable[int]()
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		home := uint64(rapid.IntRange(0, 63).Draw(rt, "home")) // near the end: runs wrap
		ls := make([]*lane[int], n)
		for i := range ls {
			ls[i] = &lane[int]{key: "k" + strconv.Itoa(i), slot: -1}
			kt.put(ls[i], home+uint64(i)<<20) // one home while the table is smaller than 2^20
		}
		for _, i := range rapid.Permutation(intsUpTo(n)).Draw(rt, "order") {
			kt.remove(ls[i])
			ls[i] = nil
			for j, l := range ls {
				if l != nil {
					got, _ := kt.get(l.key, home+uint64(j)<<20)
					require.Same(rt, l, got)
				}
			}
		}
		require.Zero(rt, kt.n)
	})
}

func intsUpTo(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	return xs
}
