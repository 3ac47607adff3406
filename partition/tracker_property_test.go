package partition_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/aggflow/aggflow/partition"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// model is the tracker's specification in the plainest terms: every position
// delivered since the last fresh start, sorted, with its state, and the
// position Track must exceed. The prefix is the last position of the leading
// run of finished ones.
type model struct {
	delivered []modelEntry
	floor     int64
	hasFloor  bool
}

type modelEntry struct {
	pos   int64
	state string // "pending", "finished", "discarded"
}

func (m *model) prefix() (int64, bool) {
	pos, ok := int64(0), false
	for _, e := range m.delivered {
		if e.state != "finished" {
			break
		}
		pos, ok = e.pos, true
	}
	return pos, ok
}

func (m *model) count(state string) int {
	n := 0
	for _, e := range m.delivered {
		if e.state == state {
			n++
		}
	}
	return n
}

func (m *model) blocked() (int64, bool) {
	for _, e := range m.delivered {
		if e.state == "discarded" {
			return e.pos, true
		}
	}
	return 0, false
}

func (m *model) track(pos int64) error {
	if m.hasFloor && pos <= m.floor {
		return partition.ErrOutOfOrder
	}
	m.delivered = append(m.delivered, modelEntry{pos: pos, state: "pending"})
	m.floor, m.hasFloor = pos, true
	return nil
}

func (m *model) end(pos int64, state string) error {
	if p, ok := m.prefix(); ok && pos <= p {
		return partition.ErrEnded
	}
	i, found := slices.BinarySearchFunc(m.delivered, pos, func(e modelEntry, p int64) int {
		return cmpInt64(e.pos, p)
	})
	switch {
	case !found:
		return partition.ErrUntracked
	case m.delivered[i].state != "pending":
		return partition.ErrEnded
	}
	m.delivered[i].state = state
	return nil
}

func (m *model) reset(pos int64) {
	if p, ok := m.prefix(); ok && p >= pos {
		m.delivered = nil
	}
	m.delivered = slices.DeleteFunc(m.delivered, func(e modelEntry) bool { return e.pos >= pos })
	m.floor, m.hasFloor = pos-1, pos != math.MinInt64
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sameError requires got to be nil when want is, and to wrap want otherwise.
func sameError(t require.TestingT, want, got error, what string) {
	if want == nil {
		require.NoError(t, got, what)
		return
	}
	require.ErrorIs(t, got, want, what)
}

// Random interleavings of Track (with random gaps, and out-of-order
// attempts), Finish and Discard of pending and arbitrary positions, and
// Reset: the tracker equals the model after every step, its prefix is a
// prefix of what finished, and it never decreases between Resets.
func TestTrackerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tr partition.Tracker
		var m model
		start := rapid.Int64Range(-1000, 1<<50).Draw(rt, "start")
		last := start - 1
		prevPrefix, hadPrefix := int64(0), false

		// near draws a position around what was delivered: pending, ended,
		// a gap, or outside.
		near := func(rt *rapid.T, label string) int64 {
			lo := start - 3
			if len(m.delivered) > 0 {
				lo = m.delivered[0].pos - 3
			}
			return rapid.Int64Range(lo, max(lo, last+3)).Draw(rt, label)
		}
		pendingPos := func(rt *rapid.T) (int64, bool) {
			var ps []int64
			for _, e := range m.delivered {
				if e.state == "pending" {
					ps = append(ps, e.pos)
				}
			}
			if len(ps) == 0 {
				return 0, false
			}
			return rapid.SampledFrom(ps).Draw(rt, "pending"), true
		}

		rt.Repeat(map[string]func(*rapid.T){
			"track": func(rt *rapid.T) {
				gap := rapid.OneOf(rapid.Int64Range(1, 3), rapid.Int64Range(1, 1<<30), rapid.Int64Range(-2, 0)).Draw(rt, "gap")
				pos := last + gap
				want := m.track(pos)
				sameError(rt, want, tr.Track(pos), "Track")
				if want == nil {
					last = pos
				}
			},
			"finish pending": func(rt *rapid.T) {
				if pos, ok := pendingPos(rt); ok {
					require.NoError(rt, m.end(pos, "finished"))
					require.NoError(rt, tr.Finish(pos))
				}
			},
			"finish any": func(rt *rapid.T) {
				pos := near(rt, "pos")
				sameError(rt, m.end(pos, "finished"), tr.Finish(pos), "Finish")
			},
			"discard": func(rt *rapid.T) {
				pos, ok := pendingPos(rt)
				if !ok || !rapid.Bool().Draw(rt, "discard a pending one") {
					pos = near(rt, "pos")
				}
				sameError(rt, m.end(pos, "discarded"), tr.Discard(pos), "Discard")
			},
			"reset": func(rt *rapid.T) {
				pos := near(rt, "pos")
				if p, ok := m.prefix(); ok && rapid.Bool().Draw(rt, "from the prefix") {
					pos = p + 1
				}
				m.reset(pos)
				tr.Reset(pos)
				last = pos - 1
				hadPrefix = false
			},
			"": func(rt *rapid.T) {
				wantPos, wantOK := m.prefix()
				pos, ok := tr.Prefix()
				require.Equal(rt, wantOK, ok, "prefix known")
				if ok {
					require.Equal(rt, wantPos, pos, "prefix")
				}
				require.Equal(rt, m.count("pending"), tr.Pending(), "pending")
				wantBlocked, wantIsBlocked := m.blocked()
				blocked, isBlocked := tr.Blocked()
				require.Equal(rt, wantIsBlocked, isBlocked, "blocked")
				if isBlocked {
					require.Equal(rt, wantBlocked, blocked, "blocked position")
				}
				// Directly: the prefix is a finished position with nothing
				// unfinished at or below it, and never goes back.
				if ok {
					for _, e := range m.delivered {
						if e.pos <= pos {
							require.Equal(rt, "finished", e.state, "position %d at or below the prefix %d", e.pos, pos)
						}
					}
					require.True(rt, slices.ContainsFunc(m.delivered, func(e modelEntry) bool { return e.pos == pos }), "the prefix is a delivered position")
				}
				if hadPrefix {
					require.True(rt, ok, "a prefix is not lost without a Reset")
					require.GreaterOrEqual(rt, pos, prevPrefix, "the prefix never decreases between Resets")
				}
				prevPrefix, hadPrefix = pos, ok
			},
		})
	})
}

// Every completion order of a random run of positions with random gaps: after
// each Finish the prefix is the highest delivered position with every
// delivered position up to it finished (a sorted slice and a set), and a
// position finished a second time is refused.
func TestPrefixUnderAnyCompletionOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tr partition.Tracker
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		positions := make([]int64, n)
		pos := rapid.Int64Range(0, 1<<40).Draw(rt, "first")
		for i := range positions {
			positions[i] = pos
			require.NoError(rt, tr.Track(pos))
			pos += rapid.Int64Range(1, 1000).Draw(rt, "gap")
		}
		order := rapid.Permutation(positions).Draw(rt, "completion order")
		finished := make(map[int64]bool, n)
		for _, p := range order {
			require.NoError(rt, tr.Finish(p))
			finished[p] = true
			want, wantOK := int64(0), false
			for _, q := range positions {
				if !finished[q] {
					break
				}
				want, wantOK = q, true
			}
			got, ok := tr.Prefix()
			require.Equal(rt, wantOK, ok)
			require.Equal(rt, want, got)
			require.True(rt, errors.Is(tr.Finish(p), partition.ErrEnded), "a second Finish")
		}
		require.Zero(rt, tr.Pending())
	})
}
