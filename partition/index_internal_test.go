package partition

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The index against a map, in a small table where probe runs wrap around and
// collide, the cases backward-shift deletion must get right.
func TestIndexMatchesMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var x index
		x.reset(rapid.SampledFrom([]int{2, 4, 8, 16, 32}).Draw(rt, "slots"))
		want := map[int64]uint64{}
		key := rapid.OneOf(rapid.Int64Range(-20, 20), rapid.Int64())
		seq := uint64(0)
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(rt *rapid.T) {
				pos := key.Draw(rt, "pos")
				if _, ok := want[pos]; ok || 2*(len(want)+1) > len(x.slots) {
					rt.Skip("present, or the table would be more than half full")
				}
				seq++
				x.put(pos, seq)
				want[pos] = seq
			},
			"del": func(rt *rapid.T) {
				if len(want) == 0 {
					rt.Skip("empty")
				}
				var keys []int64
				for k := range want {
					keys = append(keys, k)
				}
				pos := rapid.SampledFrom(keys).Draw(rt, "pos")
				x.del(pos)
				delete(want, pos)
			},
			"": func(rt *rapid.T) {
				for pos, s := range want {
					got, ok := x.get(pos)
					require.True(rt, ok, "position %d is found", pos)
					require.Equal(rt, s, got)
				}
				probe := key.Draw(rt, "probe")
				_, present := want[probe]
				_, found := x.get(probe)
				require.Equal(rt, present, found, "position %d", probe)
				n := 0
				for _, sl := range x.slots {
					if sl.seq != 0 {
						n++
					}
				}
				require.Equal(rt, len(want), n, "no slot is left behind")
			},
		})
	})
}
