package testkit

import (
	"errors"
	"math"
	"slices"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/partition"
)

// Tracker is what the tracker checks drive: the methods of
// partition.Tracker, so that a binding can check the tracker it holds (an
// intake's, or one behind its own commit bookkeeping) against the same
// specification.
type Tracker interface {
	Track(pos int64) error
	Finish(pos int64) error
	Discard(pos int64) error
	Reset(pos int64)
	Prefix() (int64, bool)
	Pending() int
	Blocked() (int64, bool)
}

// TrackerModel is the finished-prefix tracker's specification in the
// plainest terms: every position delivered since the last fresh start,
// sorted, with its state, and the position Track must exceed. The prefix is
// the last position of the leading run of finished ones. Each method costs
// O(positions held).
type TrackerModel struct {
	delivered []modelEntry
	floor     int64
	hasFloor  bool
}

type modelEntry struct {
	pos   int64
	state string // "pending", "finished", "discarded"
}

// Prefix returns the finished prefix, ok false while none.
func (m *TrackerModel) Prefix() (int64, bool) {
	pos, ok := int64(0), false
	for _, e := range m.delivered {
		if e.state != "finished" {
			break
		}
		pos, ok = e.pos, true
	}
	return pos, ok
}

// Pending returns the number of positions tracked and not ended.
func (m *TrackerModel) Pending() int { return m.count("pending") }

func (m *TrackerModel) count(state string) int {
	n := 0
	for _, e := range m.delivered {
		if e.state == state {
			n++
		}
	}
	return n
}

// Blocked returns the lowest discarded position held.
func (m *TrackerModel) Blocked() (int64, bool) {
	for _, e := range m.delivered {
		if e.state == "discarded" {
			return e.pos, true
		}
	}
	return 0, false
}

// Track records pos as delivered, or returns partition.ErrOutOfOrder.
func (m *TrackerModel) Track(pos int64) error {
	if m.hasFloor && pos <= m.floor {
		return partition.ErrOutOfOrder
	}
	m.delivered = append(m.delivered, modelEntry{pos: pos, state: "pending"})
	m.floor, m.hasFloor = pos, true
	return nil
}

// Finish ends pos as handled, or returns partition.ErrEnded or
// partition.ErrUntracked.
func (m *TrackerModel) Finish(pos int64) error { return m.end(pos, "finished") }

// Discard ends pos without handling it; errors as for Finish.
func (m *TrackerModel) Discard(pos int64) error { return m.end(pos, "discarded") }

func (m *TrackerModel) end(pos int64, state string) error {
	if p, ok := m.Prefix(); ok && pos <= p {
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

// Reset forgets every position at or above pos (everything when the prefix
// is at or above it).
func (m *TrackerModel) Reset(pos int64) {
	if p, ok := m.Prefix(); ok && p >= pos {
		m.delivered = nil
	}
	m.delivered = slices.DeleteFunc(m.delivered, func(e modelEntry) bool { return e.pos >= pos })
	m.floor, m.hasFloor = pos-1, pos != math.MinInt64
}

// contains reports whether pos was delivered since the last fresh start.
func (m *TrackerModel) contains(pos int64) bool {
	return slices.ContainsFunc(m.delivered, func(e modelEntry) bool { return e.pos == pos })
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

// CheckTracker drives tr, a fresh tracker, through random interleavings of
// Track (with random gaps, and out-of-order attempts), Finish and Discard
// of pending and arbitrary positions, and Reset, and requires after every
// step that it equals a TrackerModel, that its prefix is a finished
// delivered position with nothing unfinished at or below it, and that the
// prefix never decreases between Resets. after, if not nil, runs after each
// of those checks with the model, for what a binding builds on the tracker
// (the offset it would commit). Call it inside rapid.Check.
func CheckTracker(rt *rapid.T, tr Tracker, after func(rt *rapid.T, m *TrackerModel)) {
	var m TrackerModel
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
			want := m.Track(pos)
			sameError(rt, want, tr.Track(pos), "Track")
			if want == nil {
				last = pos
			}
		},
		"finish pending": func(rt *rapid.T) {
			if pos, ok := pendingPos(rt); ok {
				require.NoError(rt, m.Finish(pos))
				require.NoError(rt, tr.Finish(pos))
			}
		},
		"finish any": func(rt *rapid.T) {
			pos := near(rt, "pos")
			sameError(rt, m.Finish(pos), tr.Finish(pos), "Finish")
		},
		"discard": func(rt *rapid.T) {
			pos, ok := pendingPos(rt)
			if !ok || !rapid.Bool().Draw(rt, "discard a pending one") {
				pos = near(rt, "pos")
			}
			sameError(rt, m.Discard(pos), tr.Discard(pos), "Discard")
		},
		"reset": func(rt *rapid.T) {
			pos := near(rt, "pos")
			if p, ok := m.Prefix(); ok && rapid.Bool().Draw(rt, "from the prefix") {
				pos = p + 1
			}
			m.Reset(pos)
			tr.Reset(pos)
			last = pos - 1
			hadPrefix = false
		},
		"": func(rt *rapid.T) {
			wantPos, wantOK := m.Prefix()
			pos, ok := tr.Prefix()
			require.Equal(rt, wantOK, ok, "prefix known")
			if ok {
				require.Equal(rt, wantPos, pos, "prefix")
			}
			require.Equal(rt, m.Pending(), tr.Pending(), "pending")
			wantBlocked, wantIsBlocked := m.Blocked()
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
				require.True(rt, m.contains(pos), "the prefix is a delivered position")
			}
			if hadPrefix {
				require.True(rt, ok, "a prefix is not lost without a Reset")
				require.GreaterOrEqual(rt, pos, prevPrefix, "the prefix never decreases between Resets")
			}
			prevPrefix, hadPrefix = pos, ok
			if after != nil {
				after(rt, &m)
			}
		},
	})
}

// CheckPrefixUnderAnyCompletionOrder tracks a random run of positions with
// random gaps in tr, a fresh tracker, finishes them in a random order, and
// requires after each Finish that the prefix is the highest delivered
// position with every delivered position up to it finished, and that a
// second Finish is refused with partition.ErrEnded. Call it inside
// rapid.Check.
func CheckPrefixUnderAnyCompletionOrder(rt *rapid.T, tr Tracker) {
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
}
