package partition

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
)

// indexed counts the positions t's index holds.
func indexed(t *Tracker) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.index.slots {
		if s.seq != 0 {
			n++
		}
	}
	return n
}

// An intake's deliveries are found by the sequence number they carry, not
// by the tracker's index: a record delivered costs no hashing, and its
// outcome goes straight to its ring entry.
func TestIntakeDeliveriesBypassTheIndex(t *testing.T) {
	sched, err := schedulers.NewParallel("direct", 2)
	require.NoError(t, err)
	defer sched.Dispose()
	release := make(chan struct{})
	handled := make(chan int64, 64)
	d, err := NewDispatcher("direct", aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}, sched,
		func(s string) string { return s },
		func(ctx context.Context, x Delivery[string]) error {
			<-release
			handled <- x.Position
			return nil
		})
	require.NoError(t, err)
	in, err := d.Assign(context.Background(), 0, 10)
	require.NoError(t, err)
	for i := range 40 {
		require.NoError(t, in.Deliver(context.Background(), "acct-"+strconv.Itoa(i%7), int64(10+3*i), 1))
	}
	require.Equal(t, 0, indexed(&in.t), "positions delivered through the intake are not in the index")
	close(release)
	for range 40 {
		<-handled
	}
	settled, err := d.Close(context.Background())
	require.NoError(t, err)
	require.Equal(t, []Settled{{Partition: 0, Prefix: 10 + 3*39, OK: true, Stats: settled[0].Stats}}, settled)
}

// Positions tracked without the index (an intake's) are still found by
// Finish and Discard, by their position, between indexed ones.
func TestUnindexedPositionsFoundByPosition(t *testing.T) {
	var tr Tracker
	require.NoError(t, tr.Track(1))
	s3, err := tr.trackDirect(3, 0)
	require.NoError(t, err)
	s5, err := tr.trackDirect(5, 0)
	require.NoError(t, err)
	require.NoError(t, tr.Track(7))
	require.NoError(t, tr.Finish(5), "an unindexed position, by its position")
	require.ErrorIs(t, tr.endDirect(s5, 5, finished), ErrEnded)
	require.ErrorIs(t, tr.Finish(4), ErrUntracked, "between tracked positions")
	require.NoError(t, tr.Finish(7))
	require.NoError(t, tr.Finish(1))
	p, ok := tr.Prefix()
	require.True(t, ok)
	require.Equal(t, int64(1), p)
	require.NoError(t, tr.endDirect(s3, 3, finished))
	p, _ = tr.Prefix()
	require.Equal(t, int64(7), p)
	require.ErrorIs(t, tr.endDirect(s3, 3, finished), ErrEnded, "below the prefix")
	require.ErrorIs(t, tr.Finish(3), ErrEnded)
	require.Equal(t, 0, indexed(&tr))

	// A sequence number of a position forgotten by a Reset and tracked again
	// finds the new entry only when the position matches.
	tr.Reset(8)
	s9, err := tr.trackDirect(9, 0)
	require.NoError(t, err)
	tr.Reset(9)
	_, err = tr.trackDirect(10, 0)
	require.NoError(t, err)
	require.ErrorIs(t, tr.endDirect(s9, 9, finished), ErrUntracked)
	require.Equal(t, 1, tr.Pending())
}

// One op is one position tracked and one finished 16,384 positions behind
// it (a partition at its default bound, DefaultMaxHeldRecords): by position
// through the index (Track, Finish) against by sequence number (an
// intake's), in one run.
func BenchmarkTrackFinishHeld(b *testing.B) {
	const held = DefaultMaxHeldRecords
	b.Run("indexed", func(b *testing.B) {
		var tr Tracker
		pos := int64(0)
		for b.Loop() {
			_ = tr.Track(pos)
			if pos >= 3*held {
				if err := tr.Finish(pos - 3*held); err != nil {
					b.Fatal(err)
				}
			}
			pos += 3
		}
	})
	b.Run("direct", func(b *testing.B) {
		var tr Tracker
		seqs := make([]uint64, held)
		pos := int64(0)
		for i := 0; b.Loop(); i++ {
			if i >= held {
				if err := tr.endDirect(seqs[i%held], pos-3*held, finished); err != nil {
					b.Fatal(err)
				}
			}
			seqs[i%held], _ = tr.trackDirect(pos, 0)
			pos += 3
		}
	})
}
