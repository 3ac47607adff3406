package jetstream_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// panicsOn is a slog.Handler that panics on the records of one message and
// keeps the others.
type panicsOn struct {
	capture
	msg string
}

func (p *panicsOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == p.msg {
		panic("log handler: " + r.Message)
	}
	return p.capture.Handle(ctx, r)
}
func (p *panicsOn) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicsOn) WithGroup(string) slog.Handler      { return p }

// A log handler that panics on the consumer's failure line costs the line,
// never the stop: under Stop the poisoned message still fails the consumer,
// which acknowledges what came before it in its partition.
func TestFailureStopLogHandlerPanics(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 3, 3)
	logs := &panicsOn{capture: capture{level: slog.LevelInfo}, msg: "jetstream: consumer failed"}
	h := &poisoned{}
	cons, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, h.handle,
		jetstream.WithLogger(slog.New(logs)), jetstream.WithFailurePolicy(partition.FailurePolicy{Then: partition.Stop()}))
	require.NoError(t, err)
	require.NoError(t, cons.Prepare(ctx(t)))
	require.NoError(t, cons.Start())
	select {
	case <-cons.Done():
	case <-time.After(15 * time.Second):
		cons.ForceStop()
		<-cons.Done()
		t.Fatalf("the consumer did not stop: Failures %+v, ack floor %d", cons.Stats().Failures, e.floor("c"))
	}
	require.ErrorIs(t, cons.Err(), partition.ErrHandlerFailed)
	require.ErrorIs(t, cons.Err(), errPoison)
	require.Equal(t, uint64(4), e.floor("c"), "acknowledged up to the poison")
	require.Equal(t, partition.FailureStats{Stopped: 1}, cons.Stats().Failures)
}
