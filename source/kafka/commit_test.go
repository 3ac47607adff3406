package kafka_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// exitsOn is a slog.Handler that ends the goroutine logging with
// runtime.Goexit on the first record of one message (a test's t.FailNow in
// a log handler) and drops every record.
type exitsOn struct {
	msg    string
	exited atomic.Bool
}

func (h *exitsOn) Enabled(context.Context, slog.Level) bool { return true }

func (h *exitsOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg && h.exited.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return nil
}

func (h *exitsOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *exitsOn) WithGroup(string) slog.Handler      { return h }

// A log handler that ends the committing goroutine with runtime.Goexit (on
// the line of a panicking commit hook) fails the consumer, which stops on
// its own with the Goexit as its error, rather than going on without
// commits and without a word.
func TestALoggerGoexitOnTheCommittingGoroutineFailsTheConsumer(t *testing.T) {
	c := startCluster(t, "exit", 1)
	logs := &exitsOn{msg: "kafka: commit hook panicked"}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), codec, newJournal(1).handle, kafka.WithLogger(slog.New(logs)),
		kafka.WithCommitHook(func(int32, int64) { panic("commit hook") }))
	require.NoError(t, err)
	startConsumer(t, k)
	require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(1))}))
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the consumer did not stop after the Goexit (the handler exited: %v)", logs.exited.Load())
	}
	require.True(t, logs.exited.Load(), "the log handler ended the committing goroutine")
	require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
	require.ErrorContains(t, k.Err(), "committing")
}

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
