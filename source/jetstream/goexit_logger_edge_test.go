package jetstream_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
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

// A log handler that ends the assigning goroutine with runtime.Goexit (on
// the line of a partition claimed) fails the consumer, which stops on its
// own with the Goexit as its error, rather than going on without renewals
// or balance, with a stop that waits for that goroutine forever.
func TestALoggerGoexitOnTheAssigningGoroutineFailsTheConsumer(t *testing.T) {
	e := newEnv(t, 2)
	logs := &exitsOn{msg: "jetstream: partition claimed"}
	c, err := jetstream.NewConsumer("c", e.sub(nil), named, newSched(t), keyedCodec, noop,
		jetstream.WithDynamicAssignment("a", 5*time.Second), jetstream.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		c.ForceStop()
		select {
		case <-c.Done():
			t.Fatalf("the consumer did not stop on its own after the Goexit (the handler exited: %v)", logs.exited.Load())
		case <-time.After(10 * time.Second):
			t.Fatalf("the consumer did not stop after the Goexit, nor after a ForceStop (the handler exited: %v)", logs.exited.Load())
		}
	}
	require.True(t, logs.exited.Load(), "the log handler ended the assigning goroutine")
	require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
	require.ErrorContains(t, c.Err(), "assigning")
}
