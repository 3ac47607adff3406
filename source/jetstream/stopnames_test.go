package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// A graceful stop whose ctx ends while a partition drains returns an error
// naming that partition (docs/lifecycle.md: it "names what is still
// running"). A revocation takes the partition out of Owned before its drain,
// so the error must not be built from Owned alone.
func TestAStopThatTimesOutNamesThePartitionStillDraining(t *testing.T) {
	e := newEnv(t, 4)
	e.publish(t, 1, 1) // one exchange, in the partition of keyName(0)
	p := e.topo.PartitionOf(keyName(0))
	running, release := make(chan struct{}), make(chan struct{})
	handler := func(context.Context, partition.Delivery[keyed]) error {
		close(running)
		<-release // ignores its ctx: the drain cannot end before the stop's deadline
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{p}), named, newSched(t), keyedCodec, handler)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })
	<-running

	stopCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = c.StopGracefully(stopCtx)
	close(release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	want := fmt.Sprintf("[%d]", p)
	require.Truef(t, strings.Contains(err.Error(), want), "the error %q names no partition %s", err, want)
}
