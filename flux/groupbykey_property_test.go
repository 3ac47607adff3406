package flux_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// GroupByKey's places are reused: groups cancelled by their subscriber
// (Take) and opened again for the same keys, under random keys, arrival
// gaps, take limits and consumer delays (in virtual time), never number
// more than the cap at once, never lose or reorder an item of a key (the
// groups of one key, in the order they opened, hold increasing items), and
// every item pulled is delivered or discarded, once. The flow completes, or
// fails with ErrTooManyGroups when a new key finds every place live.
func TestGroupByKeyPlaceReuseProperty(t *testing.T) {
	leakFree(t)
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 3).Draw(rt, "cap")
		keys := rapid.IntRange(1, 5).Draw(rt, "keys")
		n := rapid.IntRange(0, 40).Draw(rt, "n")
		keyOf := rapid.SliceOfN(rapid.IntRange(0, keys-1), n, n).Draw(rt, "keyOf")
		gaps := rapid.SliceOfN(rapid.IntRange(0, 3), n, n).Draw(rt, "gaps")
		work := rapid.SliceOfN(rapid.IntRange(0, 3), n, n).Draw(rt, "work")
		takes := rapid.SliceOfN(rapid.IntRange(1, 4), 1, 8).Draw(rt, "takes")

		var steps []step
		var when time.Duration
		for i, g := range gaps {
			when += time.Duration(g) * time.Millisecond
			steps = append(steps, step{i, when})
		}
		l := newLedger()
		var mu sync.Mutex
		live, maxLive := 0, 0
		var groups []struct {
			key   int
			items []int
		}
		var err error
		synctest.Test(t, func(t *testing.T) {
			src := paced(nil, steps...).DoOnNext(l.pull)
			grouped := flux.GroupByKey(src, func(v int) int { return keyOf[v] }, limit)
			f := flux.FlatMap(grouped, func(g flux.KeyedFlux[int, int]) flux.Flux[int] {
				mu.Lock()
				i := len(groups)
				groups = append(groups, struct {
					key   int
					items []int
				}{key: g.Key})
				mu.Unlock()
				return g.Take(takes[i%len(takes)]).DoOnSubscribe(func() {
					mu.Lock()
					live++
					maxLive = max(maxLive, live)
					mu.Unlock()
				}).DoOnNext(func(v int) {
					mu.Lock()
					groups[i].items = append(groups[i].items, v)
					mu.Unlock()
					time.Sleep(time.Duration(work[v]) * time.Millisecond) // the consumer's work
				}).DoFinally(func(flux.Signal) {
					mu.Lock()
					live--
					mu.Unlock()
				})
			}, limit)
			err = flux.DoOnDiscard(f, l.discard).Subscribe(t.Context(), func(v int) error {
				l.use(v)
				return nil
			})
		})
		if err != nil {
			require.ErrorIs(rt, err, flux.ErrTooManyGroups)
		} else {
			require.Len(rt, l.pulled, n, "a completed flow pulled every item")
		}
		require.LessOrEqual(rt, maxLive, limit, "live groups")
		last := map[int]int{} // the last item delivered of each key
		for i, g := range groups {
			require.LessOrEqual(rt, len(g.items), takes[i%len(takes)], "group %d took more than its limit", i)
			for _, v := range g.items {
				require.Equal(rt, g.key, keyOf[v], "item %d in group %d of key %d", v, i, g.key)
				if prev, ok := last[g.key]; ok {
					require.Greater(rt, v, prev, "key %d reordered", g.key)
				}
				last[g.key] = v
			}
		}
		l.check(rt, true)
	})
}
