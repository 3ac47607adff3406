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
