package partition_test

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/testkit"
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

// runConcurrently tracks n positions with gaps on this goroutine and ends them
// on 8 others, each in reverse order within batches of 7, so that positions
// end far out of order; the position at index discardAt (if any) is
// discarded. A ninth goroutine reads the prefix meanwhile and counts the times
// it went back. It returns the positions tracked; every goroutine has exited.
func runConcurrently(t *testing.T, tr *partition.Tracker, n, discardAt int) []int64 {
	t.Helper()
	positions := make([]int64, n)
	for i, pos := 0, int64(100); i < n; i, pos = i+1, pos+1+int64(i%3) {
		positions[i] = pos
	}
	discarded := int64(-1)
	if discardAt >= 0 {
		discarded = positions[discardAt]
	}

	work := make(chan int64, 64)
	var failures, regressions atomic.Int64
	var finishers sync.WaitGroup
	for range 8 {
		finishers.Go(func() {
			batch := make([]int64, 0, 7)
			flush := func() {
				for i := len(batch) - 1; i >= 0; i-- {
					end := tr.Finish
					if batch[i] == discarded {
						end = tr.Discard
					}
					if end(batch[i]) != nil {
						failures.Add(1)
					}
				}
				batch = batch[:0]
			}
			for pos := range work {
				if batch = append(batch, pos); len(batch) == cap(batch) {
					flush()
				}
			}
			flush()
		})
	}
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		prev := int64(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if pos, ok := tr.Prefix(); ok {
				if pos < prev {
					regressions.Add(1)
				}
				prev = pos
			}
			runtime.Gosched()
		}
	})

	var trackErr error
	for _, pos := range positions {
		if trackErr = tr.Track(pos); trackErr != nil {
			break // joined below before failing, so that nothing leaks
		}
		work <- pos
	}
	close(work)
	finishers.Wait()
	close(stop)
	reader.Wait()
	require.NoError(t, trackErr)
	require.Zero(t, failures.Load(), "every Finish and Discard of a tracked position succeeds")
	require.Zero(t, regressions.Load(), "the prefix never went back")
	return positions
}

func TestConcurrentFinishGivesTheExactPrefix(t *testing.T) {
	var tr partition.Tracker
	positions := runConcurrently(t, &tr, 20000, -1)
	pos, ok := tr.Prefix()
	require.True(t, ok)
	require.Equal(t, positions[len(positions)-1], pos)
	require.Zero(t, tr.Pending())
}

func TestConcurrentDiscardStopsThePrefix(t *testing.T) {
	var tr partition.Tracker
	positions := runConcurrently(t, &tr, 20000, 12345)
	pos, ok := tr.Prefix()
	require.True(t, ok)
	require.Equal(t, positions[12344], pos, "the prefix stops just below the discarded position")
	blocked, ok := tr.Blocked()
	require.True(t, ok)
	require.Equal(t, positions[12345], blocked)
	require.Zero(t, tr.Pending())
}

// Random interleavings of Track (with random gaps, and out-of-order
// attempts), Finish and Discard of pending and arbitrary positions, and
// Reset: the tracker equals the model after every step, its prefix is a
// prefix of what finished, and it never decreases between Resets. The model
// and the steps are testkit's, shared with the broker bindings' tests.
func TestTrackerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { testkit.CheckTracker(rt, new(partition.Tracker), nil) })
}

// Every completion order of a random run of positions with random gaps: after
// each Finish the prefix is the highest delivered position with every
// delivered position up to it finished, and a position finished a second
// time is refused.
func TestPrefixUnderAnyCompletionOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { testkit.CheckPrefixUnderAnyCompletionOrder(rt, new(partition.Tracker)) })
}
