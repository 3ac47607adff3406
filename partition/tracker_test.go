package partition_test

import (
	"math"
	"testing"

	"github.com/aggflow/aggflow/partition"
	"github.com/stretchr/testify/require"
)

// prefixOf returns the tracker's prefix, or -1 when it has none, so that one
// require.Equal states both.
func prefixOf(t *partition.Tracker) int64 {
	pos, ok := t.Prefix()
	if !ok {
		return -1
	}
	return pos
}

func trackAll(t *testing.T, tr *partition.Tracker, positions ...int64) {
	t.Helper()
	for _, p := range positions {
		require.NoError(t, tr.Track(p))
	}
}

func TestZeroTrackerIsEmpty(t *testing.T) {
	var tr partition.Tracker
	_, ok := tr.Prefix()
	require.False(t, ok)
	require.Zero(t, tr.Pending())
	_, ok = tr.Blocked()
	require.False(t, ok)
	require.ErrorIs(t, tr.Finish(0), partition.ErrUntracked)
	require.ErrorIs(t, tr.Discard(0), partition.ErrUntracked)
	tr.Reset(5)
	require.ErrorIs(t, tr.Track(4), partition.ErrOutOfOrder)
	require.NoError(t, tr.Track(5))
}

func TestPrefixWaitsForTheLowestUnfinished(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 10, 11, 15, 20) // gaps, as a broker has them
	require.NoError(t, tr.Finish(15))
	require.NoError(t, tr.Finish(11))
	require.Equal(t, int64(-1), prefixOf(&tr), "10 has not finished")
	require.Equal(t, 2, tr.Pending())
	require.NoError(t, tr.Finish(10))
	require.Equal(t, int64(15), prefixOf(&tr), "10, 11 and 15 finished; 20 holds")
	require.NoError(t, tr.Finish(20))
	require.Equal(t, int64(20), prefixOf(&tr))
	require.Zero(t, tr.Pending())
}

func TestTrackRefusesPositionsNotAboveTheLast(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 3)
	err := tr.Track(3)
	require.ErrorIs(t, err, partition.ErrOutOfOrder)
	require.EqualError(t, err, "partition: track 3: not above 3: partition: position out of order")
	require.ErrorIs(t, tr.Track(2), partition.ErrOutOfOrder)
	require.Equal(t, 1, tr.Pending(), "a refused position is not tracked")
	require.NoError(t, tr.Track(4))
}

func TestEndErrors(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 1, 2, 4)
	require.NoError(t, tr.Finish(1))
	require.NoError(t, tr.Discard(4))

	err := tr.Finish(3)
	require.ErrorIs(t, err, partition.ErrUntracked, "a gap")
	require.EqualError(t, err, "partition: end 3: partition: position not tracked")
	require.ErrorIs(t, tr.Finish(5), partition.ErrUntracked, "never delivered")

	err = tr.Finish(1)
	require.ErrorIs(t, err, partition.ErrEnded, "retired into the prefix")
	require.EqualError(t, err, "partition: end 1: at or below the finished prefix 1: partition: position already ended")
	require.ErrorIs(t, tr.Finish(0), partition.ErrEnded, "below the prefix")

	err = tr.Finish(4)
	require.ErrorIs(t, err, partition.ErrEnded)
	require.EqualError(t, err, "partition: end 4: discarded before: partition: position already ended")
	require.NoError(t, tr.Finish(2))
	require.ErrorIs(t, tr.Discard(2), partition.ErrEnded)
	require.Equal(t, int64(2), prefixOf(&tr))
	require.Zero(t, tr.Pending())
}

func TestDiscardedPositionIsNeverPassed(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 1, 2, 3, 4)
	require.NoError(t, tr.Finish(1))
	require.NoError(t, tr.Discard(2))
	require.NoError(t, tr.Finish(3))
	require.NoError(t, tr.Finish(4))
	require.Equal(t, int64(1), prefixOf(&tr), "2 was discarded: nothing above it is acknowledged")
	blocked, ok := tr.Blocked()
	require.True(t, ok)
	require.Equal(t, int64(2), blocked)
	require.Zero(t, tr.Pending(), "every position ended")

	// The broker delivers again from the prefix + 1.
	tr.Reset(2)
	_, ok = tr.Blocked()
	require.False(t, ok)
	require.Equal(t, int64(1), prefixOf(&tr), "a Reset above the prefix keeps it")
	require.ErrorIs(t, tr.Finish(3), partition.ErrUntracked, "forgotten by the Reset")
	trackAll(t, &tr, 2, 3, 4)
	require.NoError(t, tr.Finish(2))
	require.Equal(t, int64(2), prefixOf(&tr))
}

func TestBlockedIsTheLowestDiscarded(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 1, 2, 3, 4, 5)
	require.NoError(t, tr.Discard(4))
	require.NoError(t, tr.Discard(2))
	blocked, _ := tr.Blocked()
	require.Equal(t, int64(2), blocked)
	tr.Reset(3) // forgets 4 but not 2
	blocked, ok := tr.Blocked()
	require.True(t, ok)
	require.Equal(t, int64(2), blocked)
	require.Equal(t, 1, tr.Pending(), "1 is left pending")
}

func TestResetAtOrBelowThePrefixStartsAfresh(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 5, 6, 7, 8)
	for _, p := range []int64{5, 6, 7} {
		require.NoError(t, tr.Finish(p))
	}
	require.Equal(t, int64(7), prefixOf(&tr))
	tr.Reset(6) // the broker went back to 6
	require.Equal(t, int64(-1), prefixOf(&tr))
	require.Zero(t, tr.Pending(), "8 was forgotten")
	require.ErrorIs(t, tr.Track(5), partition.ErrOutOfOrder, "Track accepts positions from 6 on")
	trackAll(t, &tr, 6, 7)
	require.NoError(t, tr.Finish(6))
	require.Equal(t, int64(6), prefixOf(&tr))
}

func TestResetAboveEverythingRaisesTheFloor(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, 1)
	tr.Reset(10)
	require.Equal(t, 1, tr.Pending(), "nothing at or above 10 was held")
	require.ErrorIs(t, tr.Track(9), partition.ErrOutOfOrder)
	trackAll(t, &tr, 10)
	require.NoError(t, tr.Finish(10))
	require.Equal(t, int64(-1), prefixOf(&tr), "1 still holds the prefix")
	require.NoError(t, tr.Finish(1))
	require.Equal(t, int64(10), prefixOf(&tr))
}

func TestExtremePositions(t *testing.T) {
	var tr partition.Tracker
	trackAll(t, &tr, math.MinInt64, -1, 0, math.MaxInt64)
	require.ErrorIs(t, tr.Track(math.MaxInt64), partition.ErrOutOfOrder, "nothing is above the largest position")
	for _, p := range []int64{math.MaxInt64, 0, -1, math.MinInt64} {
		require.NoError(t, tr.Finish(p))
	}
	require.Equal(t, int64(math.MaxInt64), prefixOf(&tr))
	tr.Reset(math.MinInt64)
	require.Equal(t, int64(-1), prefixOf(&tr))
	require.NoError(t, tr.Track(math.MinInt64), "a Reset at the smallest position accepts every position")
}

// The ring and its index grow past their first size and keep every position:
// a long run of unfinished positions behind one that holds the prefix.
func TestGrowthKeepsEveryPosition(t *testing.T) {
	var tr partition.Tracker
	const n = 5000
	for i := range int64(n) {
		require.NoError(t, tr.Track(i*7))
	}
	for i := int64(n - 1); i >= 1; i-- {
		require.NoError(t, tr.Finish(i*7))
	}
	require.Equal(t, int64(-1), prefixOf(&tr))
	require.Equal(t, 1, tr.Pending())
	require.NoError(t, tr.Finish(0))
	require.Equal(t, int64((n-1)*7), prefixOf(&tr))
	require.Zero(t, tr.Pending())
}

// Once the ring has grown to the positions held, tracking and finishing out
// of order allocates nothing.
func TestSteadyStateDoesNotAllocate(t *testing.T) {
	var tr partition.Tracker
	const held, batch = 1024, 8
	next := int64(0)
	step := func() {
		for range batch {
			_ = tr.Track(next * 3) // with gaps
			next++
		}
		for i := next - held - 1; i >= next-held-batch && i >= 0; i-- {
			_ = tr.Finish(i * 3)
		}
	}
	for range 2 * held / batch {
		step()
	}
	require.Zero(t, testing.AllocsPerRun(1000, step))
	pos, ok := tr.Prefix()
	require.True(t, ok)
	require.Equal(t, (next-held-1)*3, pos)
	require.Equal(t, held, tr.Pending())
}
