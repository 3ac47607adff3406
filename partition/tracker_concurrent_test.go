package partition_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aggflow/aggflow/partition"
	"github.com/stretchr/testify/require"
)

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
