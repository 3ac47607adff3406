package kafka_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/source/kafka"
)

// A commit hook that ends its goroutine with runtime.Goexit (t.FailNow in a
// test's hook) must not cost the consumer its commits nor its end: the
// records handled after its first call are committed still, and a graceful
// stop, whose final commit calls the hook again, reaches Done.
func TestACommitHookGoexitKeepsCommittingAndStopping(t *testing.T) {
	c := startCluster(t, "exit", 1)
	called := make(chan int64, 100)
	j := newJournal(3)
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), codec, j.handle, kafka.WithLogger(quiet),
		kafka.WithCommitHook(func(_ int32, off int64) {
			called <- off
			runtime.Goexit()
		}))
	require.NoError(t, err)
	startConsumer(t, k)
	produce := func(seq int) {
		require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(seq))}))
	}
	produce(1)
	select {
	case off := <-called:
		require.Equal(t, int64(1), off)
	case <-time.After(20 * time.Second):
		t.Fatal("no commit of the first record")
	}
	produce(2)
	produce(3)
	j.wait(t, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, k.StopGracefully(ctx), "the stop reaches its end")
	committed, err := c.Committed(context.Background(), "g", "exit")
	require.NoError(t, err)
	require.Equal(t, int64(3), committed[0], "every handled record committed")
}
