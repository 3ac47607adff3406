package jetstream_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
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

// The fetching goroutine runs user code other than the decoder too: the
// codec's ID (through the partition's intake) and the reject hook. Each
// that ends it with runtime.Goexit stops the consumer with an error, the
// exchanges before are handled, and nothing past them is acknowledged.
func TestAnIDOrRejectHookGoexitStopsTheConsumer(t *testing.T) {
	cases := map[string]func(codec *jetstream.Codec[keyed]) []jetstream.Option{
		"Codec.ID": func(codec *jetstream.Codec[keyed]) []jetstream.Option {
			codec.ID = func(x keyed) string {
				if x.Seq == 3 {
					runtime.Goexit()
				}
				return x.Key
			}
			return nil
		},
		"reject hook": func(codec *jetstream.Codec[keyed]) []jetstream.Option {
			codec.Decode = func(key string, msg natsjs.Msg) (keyed, error) {
				x, err := decodeKeyed(key, msg)
				if err == nil && x.Seq == 3 {
					err = errors.New("refused")
				}
				return x, err
			}
			return []jetstream.Option{jetstream.WithRejected(func(context.Context, natsjs.Msg, error) error {
				runtime.Goexit()
				return nil
			})}
		},
	}
	for name, setUp := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.publish(t, 1, 5)
			codec := keyedCodec
			opts := setUp(&codec)
			var mu sync.Mutex
			var seen []uint64
			handler := func(_ context.Context, d partition.Delivery[keyed]) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, d.Exchange.Seq)
				return nil
			}
			c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), codec, handler, opts...)
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))
			require.NoError(t, c.Start())
			t.Cleanup(func() { c.ForceStop(); <-c.Done() })
			select {
			case <-c.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the consumer did not stop after the Goexit")
			}
			require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
			mu.Lock()
			assert.Equal(t, []uint64{1, 2}, seen, "the exchanges before were handled, none after")
			mu.Unlock()
			assert.LessOrEqual(t, e.ackFloor(t, "c", 0), uint64(2), "nothing past the handled prefix acknowledged")
		})
	}
}
