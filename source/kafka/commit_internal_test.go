package kafka

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// The tracker of an intake the consumer assigned, driven by testkit's
// tracker checks (the same steps and model as package partition's own
// property tests), and after every step the consumer's commit bookkeeping:
// the offset it would commit is the model's prefix + 1 exactly when that is
// above the last acknowledged commit, and an acknowledged commit is not
// sent again. (Without the finished map, whose changes are committed too:
// TestMultiProcessKillWithAStuckRecordReplaysOnlyTheUnfinished.)
func TestCommitOffsetsFollowTheTrackerModel(t *testing.T) {
	sched, err := schedulers.NewParallel("property", 1)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, sched.DisposeGracefully(ctx))
	}()
	named := aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	codec := Codec[string]{Decode: func(k, _ []byte) (string, error) { return string(k), nil }, ID: func(s string) string { return s }}
	handler := func(context.Context, partition.Delivery[string]) error { return nil }

	rapid.Check(t, func(rt *rapid.T) {
		c, err := NewConsumer("property", Subscription{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topic: "t"},
			named, sched, codec, handler, WithLogger(quiet), WithFinishedMapLen(0))
		require.NoError(rt, err)
		// From math.MinInt64: a tracker as fresh as CheckTracker wants.
		in, err := c.disp.Assign(context.Background(), 3, math.MinInt64)
		require.NoError(rt, err)
		defer func() { _, _ = c.disp.Close(context.Background()) }()
		o := &owned[string]{in: in, from: math.MinInt64, committed: -1}
		c.owned[3] = o

		testkit.CheckTracker(rt, in.Tracker(), func(rt *rapid.T, m *testkit.TrackerModel) {
			before := o.committed
			ready := c.ready()
			pos, ok := m.Prefix()
			if ok && pos+1 > before {
				require.Equal(rt, map[int32]commitAt{3: {offset: pos + 1, moved: true}}, ready, "commit the prefix + 1")
			} else {
				require.Empty(rt, ready, "nothing above the last acknowledged commit")
			}
			if len(ready) > 0 && rapid.Bool().Draw(rt, "acknowledged") {
				c.acknowledged(ready)
				require.Equal(rt, pos+1, o.committed)
				require.Empty(rt, c.ready(), "an acknowledged offset is not committed again")
			}
			require.GreaterOrEqual(rt, o.committed, before, "the acknowledged offset never goes back")
		})
	})
}
