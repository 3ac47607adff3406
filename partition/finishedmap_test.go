package partition_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/partition"
)

// mapGen draws a valid map: ascending spans at or above base with a
// position between any two.
func mapGen(rt *rapid.T) partition.FinishedMap {
	base := rapid.Int64Range(-1<<40, 1<<40).Draw(rt, "base")
	n := rapid.IntRange(0, 1000).Draw(rt, "spans")
	dense := rapid.Bool().Draw(rt, "dense") // small gaps compress
	m := partition.FinishedMap{Base: base}
	start := base
	for range n {
		gapMax, lenMax := int64(1<<20), int64(1<<20)
		if dense {
			gapMax, lenMax = 3, 3
		}
		first := start + rapid.Int64Range(0, gapMax).Draw(rt, "gap")
		last := first + rapid.Int64Range(0, lenMax).Draw(rt, "len")
		m.Spans = append(m.Spans, partition.Span{First: first, Last: last})
		start = last + 2
	}
	return m
}

// Any valid map encodes within the limit and decodes to a prefix of its
// spans: all of them when the encoding says so, never a position the map
// does not hold.
func TestFinishedMapRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := mapGen(rt)
		limit := rapid.IntRange(24, 5000).Draw(rt, "limit")
		s, kept, err := m.Encode(limit)
		require.NoError(rt, err)
		require.LessOrEqual(rt, len(s), limit)
		require.GreaterOrEqual(rt, kept, 0)
		got, err := partition.DecodeFinishedMap(s)
		require.NoError(rt, err)
		require.Equal(rt, m.Base, got.Base)
		require.Len(rt, got.Spans, kept)
		if kept > 0 {
			require.Equal(rt, m.Spans[:kept], got.Spans, "a prefix of the spans")
		}
		if kept < len(m.Spans) {
			// The limit is the reason: the whole map does not fit.
			whole, _, err := m.Encode(math.MaxInt)
			require.NoError(rt, err)
			require.Greater(rt, len(whole), limit, "the whole map would have fitted")
		}
	})
}

// A map at the edges of int64 round-trips; spans out of order, overlapping,
// adjacent or below the base are refused as invalid arguments.
func TestFinishedMapEdges(t *testing.T) {
	for _, m := range []partition.FinishedMap{
		{Base: 0},
		{Base: math.MinInt64, Spans: []partition.Span{{math.MinInt64, math.MinInt64}, {0, math.MaxInt64}}},
		{Base: math.MaxInt64, Spans: []partition.Span{{math.MaxInt64, math.MaxInt64}}},
	} {
		s, kept, err := m.Encode(0)
		require.NoError(t, err)
		require.Equal(t, len(m.Spans), kept)
		got, err := partition.DecodeFinishedMap(s)
		require.NoError(t, err)
		require.Equal(t, m.Base, got.Base)
		require.Equal(t, len(m.Spans), len(got.Spans))
		for i := range m.Spans {
			require.Equal(t, m.Spans[i], got.Spans[i])
		}
	}
	for _, m := range []partition.FinishedMap{
		{Base: 10, Spans: []partition.Span{{9, 12}}},
		{Base: 10, Spans: []partition.Span{{12, 11}}},
		{Base: 10, Spans: []partition.Span{{10, 12}, {13, 14}}},
		{Base: 10, Spans: []partition.Span{{10, 12}, {11, 14}}},
		{Base: 0, Spans: []partition.Span{{0, math.MaxInt64 - 1}, {math.MaxInt64, math.MaxInt64}}},
	} {
		_, _, err := m.Encode(0)
		require.ErrorIs(t, err, partition.ErrInvalidArgument, "%+v", m)
	}
	_, err := partition.DecodeFinishedMap("")
	require.ErrorIs(t, err, partition.ErrNotFinishedMap)
	_, err = partition.DecodeFinishedMap("member-1234") // franz-go's own metadata: the member id
	require.ErrorIs(t, err, partition.ErrNotFinishedMap)
	_, err = partition.DecodeFinishedMap(partition.FinishedMapPrefix + "!!")
	require.ErrorIs(t, err, partition.ErrFinishedMap)
}

// A regular map of 50,000 spans compresses into the limit; one of 50,000
// spans of random lengths and gaps does not, and keeps what fits: a prefix.
func TestFinishedMapTruncates(t *testing.T) {
	m := partition.FinishedMap{Base: 1000}
	for p := int64(1001); p < 101_000; p += 2 {
		m.Spans = append(m.Spans, partition.Span{First: p, Last: p})
	}
	s, kept, err := m.Encode(partition.DefaultFinishedMapLen)
	require.NoError(t, err)
	require.Equal(t, len(m.Spans), kept, "every other position compresses")
	t.Logf("%d single-position spans, every other position: %d bytes", len(m.Spans), len(s))
	rnd := rand.New(rand.NewPCG(1, 2))
	m.Spans = m.Spans[:0]
	for p := int64(1001); len(m.Spans) < 50_000; {
		first := p + rnd.Int64N(100)
		last := first + rnd.Int64N(100)
		m.Spans = append(m.Spans, partition.Span{First: first, Last: last})
		p = last + 2
	}
	s, kept, err = m.Encode(partition.DefaultFinishedMapLen)
	require.NoError(t, err)
	require.LessOrEqual(t, len(s), partition.DefaultFinishedMapLen)
	require.Positive(t, kept)
	require.Less(t, kept, len(m.Spans))
	got, err := partition.DecodeFinishedMap(s)
	require.NoError(t, err)
	require.True(t, got.Contains(m.Spans[0].First))
	require.True(t, got.Contains(m.Spans[kept-1].Last))
	require.False(t, got.Contains(m.Spans[kept].First), "the first span left out")
	require.Equal(t, m.Spans[:kept], got.Spans)
	t.Logf("%d spans of random lengths and gaps: %d fit in %d bytes", len(m.Spans), kept, len(s))
}

// The decoder never panics and refuses with one of its two sentinels, and
// what it accepts encodes back to a map equal to it.
func FuzzDecodeFinishedMap(f *testing.F) {
	for _, m := range []partition.FinishedMap{
		{Base: 7},
		{Base: 7, Spans: []partition.Span{{8, 100}, {102, 102}}},
	} {
		s, _, _ := m.Encode(0)
		f.Add(s)
	}
	big := partition.FinishedMap{}
	for p := int64(1); p < 5000; p += 2 {
		big.Spans = append(big.Spans, partition.Span{First: p, Last: p})
	}
	s, _, _ := big.Encode(0)
	f.Add(s)
	f.Add(partition.FinishedMapPrefix + "AQ")
	f.Add("metadata")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := partition.DecodeFinishedMap(s)
		if err != nil {
			require.True(t, errors.Is(err, partition.ErrFinishedMap) || errors.Is(err, partition.ErrNotFinishedMap), "%v", err)
			require.Equal(t, errors.Is(err, partition.ErrNotFinishedMap), !strings.HasPrefix(s, partition.FinishedMapPrefix))
			return
		}
		enc, kept, err := m.Encode(1 << 20)
		require.NoError(t, err, "a decoded map is valid")
		require.Equal(t, len(m.Spans), kept)
		back, err := partition.DecodeFinishedMap(enc)
		require.NoError(t, err)
		require.Equal(t, m.Base, back.Base)
		require.Equal(t, m.Spans, back.Spans)
	})
}

// FinishedAbove gives the finished positions above the prefix as spans of
// consecutively tracked positions, across the positions never tracked:
// random tracks (with gaps) and finishes, against a model.
func TestTrackerFinishedAbove(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tr partition.Tracker
		tr.Reset(0)
		var tracked []int64
		done := map[int64]bool{}
		pos := int64(-1)
		for range rapid.IntRange(0, 200).Draw(rt, "n") {
			pos += rapid.Int64Range(1, 3).Draw(rt, "gap")
			require.NoError(rt, tr.Track(pos))
			tracked = append(tracked, pos)
		}
		for _, i := range rapid.Permutation(tracked).Draw(rt, "order")[:rapid.IntRange(0, len(tracked)).Draw(rt, "finished")] {
			require.NoError(rt, tr.Finish(i))
			done[i] = true
		}
		base := int64(0)
		if p, ok := tr.Prefix(); ok {
			base = p + 1
		}
		var want []partition.Span
		open := false
		for _, p := range tracked {
			switch {
			case p < base || !done[p]:
				open = false
			case open:
				want[len(want)-1].Last = p
			default:
				want = append(want, partition.Span{First: p, Last: p})
				open = true
			}
		}
		got := tr.FinishedAbove(base, nil)
		require.Equal(rt, want, got)
		m := partition.FinishedMap{Base: base, Spans: got}
		_, _, err := m.Encode(0)
		require.NoError(rt, err, "FinishedAbove makes valid spans")
		for _, p := range tracked {
			require.Equal(rt, p >= base && done[p], m.Contains(p), "position %d", p)
		}
	})
}
