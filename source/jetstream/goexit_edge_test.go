package jetstream_test

import (
	"runtime"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// A decoder that ends its goroutine with runtime.Goexit (what t.FailNow
// does) stops the consumer with an error, as its panic does, and nothing
// past the handled prefix is acknowledged.
func TestADecoderGoexitStopsTheConsumer(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 1, 1)
	exit := func(string, natsjs.Msg) (keyed, error) { runtime.Goexit(); return keyed{}, nil }
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), jetstream.Codec[keyed]{Decode: exit, ID: keyOf}, noop)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the consumer did not stop after its decoder's Goexit")
	}
	require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
	var pe *jetstream.PanicError
	require.ErrorAs(t, c.Err(), &pe)
	require.Zero(t, e.ackFloor(t, "c", 0))
}
