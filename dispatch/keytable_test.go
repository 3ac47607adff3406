package dispatch

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestKeyTableIsAMap checks the table against a map under random puts,
// removes and lookups, with ids drawn from a small set so that runs of
// probed slots form, wrap around the end and are cut by removals; after
// each step every indexed lane's slot points at it and the count agrees.
func TestKeyTableIsAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kt := newKeyTable[int]()
		want := map[string]*lane[int]{}
		idGen := rapid.Map(rapid.IntRange(0, 120), func(i int) string { return "id-" + strconv.Itoa(i) })
		for step := range rapid.IntRange(1, 300).Draw(rt, "steps") {
			id := idGen.Draw(rt, "id")
			if l, ok := want[id]; ok && rapid.Bool().Draw(rt, "remove") {
				kt.remove(l)
				delete(want, id)
			} else if !ok {
				l := &lane[int]{key: id, slot: -1}
				kt.put(l, kt.hash(id))
				want[id] = l
			}
			require.Equal(rt, len(want), kt.n, "step %d", step)
			for id, l := range want {
				require.Same(rt, l, kt.get(id, kt.hash(id)), "step %d: id %q", step, id)
				require.Same(rt, l, kt.slots[l.slot].l, "step %d: id %q's slot", step, id)
			}
			probe := idGen.Draw(rt, "probe")
			if _, ok := want[probe]; !ok {
				require.Nil(rt, kt.get(probe, kt.hash(probe)), "step %d: id %q was never put or was removed", step, probe)
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
					require.Same(rt, l, kt.get(l.key, home+uint64(j)<<20))
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
