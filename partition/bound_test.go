package partition_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
)

// The bound counts every position held above the prefix, finished or not:
// with the first position unfinished, finished ones above it fill the
// bound, Room goes to 0 and stays there until what is held fell to half,
// when Freed signals once.
func TestTheBoundCountsTheFinishedAboveThePrefix(t *testing.T) {
	var tr partition.Tracker
	require.Equal(t, math.MaxInt, tr.Room(), "no bound")
	tr.SetBound(10, 0)
	for pos := range int64(10) {
		require.Equal(t, 10-int(pos), tr.Room())
		require.NoError(t, tr.TrackSize(pos, 3))
		if pos > 0 {
			require.NoError(t, tr.Finish(pos))
		}
	}
	records, bytes := tr.Held()
	require.Equal(t, 10, records, "nine finished above the unfinished first")
	require.Equal(t, int64(30), bytes)
	require.Equal(t, 1, tr.Pending())
	require.Zero(t, tr.Room(), "the bound is reached")

	require.NoError(t, tr.Finish(0))
	records, bytes = tr.Held()
	require.Zero(t, records)
	require.Zero(t, bytes)
	require.Equal(t, 10, tr.Room())
	select {
	case <-tr.Freed():
	default:
		t.Fatal("Freed did not signal")
	}
	select {
	case <-tr.Freed():
		t.Fatal("Freed signalled twice")
	default:
	}
}

// The low-water mark: a reached bound frees at half, not one below.
func TestTheBoundFreesAtHalf(t *testing.T) {
	var tr partition.Tracker
	tr.SetBound(8, 0)
	for pos := range int64(8) {
		require.NoError(t, tr.Track(pos))
	}
	require.Zero(t, tr.Room())
	for pos := range int64(3) {
		require.NoError(t, tr.Finish(pos))
		require.Zero(t, tr.Room(), "held %d", 8-pos-1)
	}
	require.NoError(t, tr.Finish(3))
	require.Equal(t, 4, tr.Room(), "four held, the low-water mark")
	<-tr.Freed()
}

// Bytes bound too: the bound is reached by either limit; a Reset forgets
// the bytes of what it forgets.
func TestTheBoundInBytes(t *testing.T) {
	var tr partition.Tracker
	tr.SetBound(1000, 100)
	require.NoError(t, tr.TrackSize(1, 60))
	require.Equal(t, 999, tr.Room())
	require.NoError(t, tr.TrackSize(2, 40))
	require.Zero(t, tr.Room(), "100 bytes held")
	tr.Reset(2)
	records, bytes := tr.Held()
	require.Equal(t, 1, records)
	require.Equal(t, int64(60), bytes)
	require.Zero(t, tr.Room(), "60 bytes: above the low-water mark")
	tr.Reset(1)
	records, bytes = tr.Held()
	require.Zero(t, records)
	require.Zero(t, bytes)
	require.Equal(t, 1000, tr.Room())
	<-tr.Freed()
	require.NoError(t, tr.TrackSize(1, -5), "a negative size counts as 0")
	_, bytes = tr.Held()
	require.Zero(t, bytes)
}

func TestMaxHeldBadInput(t *testing.T) {
	for _, c := range []struct {
		records int
		bytes   int64
	}{{0, 0}, {10, -1}} {
		_, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 1), func(x op) string { return x.id },
			func(context.Context, partition.Delivery[op]) error { return nil },
			partition.WithMaxHeld(c.records, c.bytes))
		require.ErrorIs(t, err, partition.ErrInvalidArgument)
		require.ErrorContains(t, err, "max held")
	}
}
