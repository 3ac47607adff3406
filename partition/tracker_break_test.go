package partition_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/partition"
)

// A break in continuity (a delivery the binding did not track) freezes the
// tracker: Track refuses until a Reset, so nothing above the hole can be
// finished and the prefix stays at or below the last position tracked
// before the break; a Reset delivers again from its position.
func TestBreakRefusesTrackUntilReset(t *testing.T) {
	var tr partition.Tracker
	require.NoError(t, tr.Track(1))
	require.NoError(t, tr.Track(2))
	tr.Break() // position 3 went elsewhere
	require.ErrorIs(t, tr.Track(4), partition.ErrBroken)
	require.True(t, tr.Broken())
	require.NoError(t, tr.Finish(2))
	require.NoError(t, tr.Finish(1))
	p, ok := tr.Prefix()
	require.True(t, ok)
	require.EqualValues(t, 2, p, "the settled prefix below the hole")
	tr.Reset(3)
	require.False(t, tr.Broken())
	require.NoError(t, tr.Track(3))
	require.NoError(t, tr.Finish(3))
	p, _ = tr.Prefix()
	require.EqualValues(t, 3, p)
}

// The invariant, whatever the interleaving: the broker delivers increasing
// positions from the last reset on; the binding tracks each or, for one it
// did not see (dropped), calls Break; Finish, Break and Reset (to the
// prefix + 1, or lower) come at any time. The prefix never passes a position
// the broker delivered since the reset that was not finished, dropped ones
// included, and Track after a Break always refuses.
func TestPrefixNeverPassesAnUnfinishedPosition(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tr partition.Tracker
		from := int64(0)
		tr.Reset(from)
		next := from          // the broker's next position
		var delivered []int64 // since the reset, in order
		finished := map[int64]bool{}
		pending := []int64{}
		broken := false
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1: // the broker delivers the next position, after a gap
				next += rapid.Int64Range(1, 3).Draw(rt, "gap")
				delivered = append(delivered, next)
				if rapid.IntRange(0, 9).Draw(rt, "dropped") == 0 {
					tr.Break() // the binding sees the consumer sequence jump
					broken = true
					continue
				}
				err := tr.Track(next)
				if broken {
					if err == nil {
						rt.Fatalf("Track(%d) accepted after a Break", next)
					}
					require.ErrorIs(rt, err, partition.ErrBroken)
					continue
				}
				require.NoError(rt, err)
				pending = append(pending, next)
			case 2, 3: // a handler finishes any pending position
				if len(pending) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(pending)-1).Draw(rt, "which")
				require.NoError(rt, tr.Finish(pending[i]))
				finished[pending[i]] = true
				pending = slices.Delete(pending, i, i+1)
			case 4:
				tr.Break()
				broken = true
			case 5: // a reset to the prefix + 1 (or below), once nothing is pending
				if len(pending) != 0 {
					continue
				}
				p, ok := tr.Prefix()
				if !ok {
					p = from - 1
				}
				from = p + 1 - rapid.Int64Range(0, 2).Draw(rt, "lower")
				tr.Reset(from)
				next, delivered, broken = from-1, nil, false
				clear(finished)
			}
			if p, ok := tr.Prefix(); ok {
				for _, d := range delivered {
					if d <= p && !finished[d] {
						rt.Fatalf("prefix %d passes %d, delivered and not finished (delivered %v)", p, d, delivered)
					}
				}
			}
		}
	})
}
