package partition_test

import (
	"sync"
	"testing"

	"github.com/aggflow/aggflow/partition"
	"github.com/stretchr/testify/require"
)

func TestSetHoldsOneTrackerPerPartition(t *testing.T) {
	var s partition.Set
	_, ok := s.Lookup(3)
	require.False(t, ok)
	require.Empty(t, s.Prefixes())

	t3 := s.Tracker(3)
	require.Same(t, t3, s.Tracker(3), "the same tracker every time")
	got, ok := s.Lookup(3)
	require.True(t, ok)
	require.Same(t, t3, got)
	t1 := s.Tracker(1)
	s.Tracker(2) // nothing finished: no prefix
	require.Equal(t, 3, s.Len())

	require.NoError(t, t3.Track(40))
	require.NoError(t, t3.Finish(40))
	require.NoError(t, t1.Track(7))
	require.NoError(t, t1.Finish(7))
	require.Equal(t, []partition.Prefix{{Partition: 1, Position: 7}, {Partition: 3, Position: 40}}, s.Prefixes())

	removed, ok := s.Remove(3)
	require.True(t, ok)
	require.Same(t, t3, removed)
	pos, _ := removed.Prefix()
	require.Equal(t, int64(40), pos, "a removed tracker keeps its prefix for the last commit")
	_, ok = s.Remove(3)
	require.False(t, ok)
	require.Equal(t, 2, s.Len())
	require.NotSame(t, t3, s.Tracker(3), "an assignment after a revocation starts afresh")
}

// Assignments, revocations and commits from many goroutines under -race: each
// goroutine owns one partition and ends with it tracked at its own prefix.
func TestSetIsSafeForConcurrentUse(t *testing.T) {
	var s partition.Set
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for p := range int32(8) {
		wg.Go(func() {
			for round := range int64(50) {
				tr := s.Tracker(p)
				if errs[p] = tr.Track(round); errs[p] != nil {
					return
				}
				if errs[p] = tr.Finish(round); errs[p] != nil {
					return
				}
				s.Prefixes()
				if round%10 == 9 && round < 49 {
					s.Remove(p)
				}
			}
		})
	}
	wg.Wait()
	for p, err := range errs {
		require.NoError(t, err, "partition %d", p)
	}
	prefixes := s.Prefixes()
	require.Len(t, prefixes, 8)
	for i, pr := range prefixes {
		require.Equal(t, partition.Prefix{Partition: int32(i), Position: 49}, pr)
	}
}
