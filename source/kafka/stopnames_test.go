package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
)

// A graceful stop whose ctx ends while a partition drains returns an error
// naming that partition (docs/lifecycle.md: it "names what is still
// running"). The revocation takes the partition out of Owned before its
// drain, so the error must not be built from Owned alone.
func TestAStopThatTimesOutNamesThePartitionStillDraining(t *testing.T) {
	c := startCluster(t, "draining", 1)
	require.NoError(t, c.Produce(context.Background(), "draining", records(1, 1)...))
	running, release := make(chan struct{}), make(chan struct{})
	handler := func(context.Context, partition.Delivery[event]) error {
		close(running)
		<-release // ignores its ctx: the drain cannot end before the stop's deadline
		return nil
	}
	k := newConsumer(t, c, "draining", "draining", newScheduler(t, 2), handler)
	startConsumer(t, k)
	<-running

	stopCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := k.StopGracefully(stopCtx)
	close(release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Truef(t, strings.Contains(err.Error(), "[0]"), "the error %q names no partition [0]", err)
}
