package jetstream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// keyed is the exchange of the tests: the sequence number of an
// aggregate's exchange, from 1.
type keyed struct {
	Key string
	Seq uint64
}

var named = aggregate.MaterializedNamedAggregate{Context: "test", Aggregate: "Keyed"}

func keyOf(x keyed) string { return x.Key }

func decodeKeyed(key string, msg natsjs.Msg) (keyed, error) {
	if len(msg.Data()) != 8 {
		return keyed{}, fmt.Errorf("payload of %d bytes, want 8", len(msg.Data()))
	}
	return keyed{Key: key, Seq: binary.BigEndian.Uint64(msg.Data())}, nil
}

// keyedCodec decodes the exchanges of the tests and groups them by key.
var keyedCodec = jetstream.Codec[keyed]{Decode: decodeKeyed, ID: keyOf}

func encodeSeq(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// env is a server, a connection and a stream of the tests.
type env struct {
	srv  *jstest.Server
	nc   *nats.Conn
	js   natsjs.JetStream
	topo jetstream.Topology
	addr string // the server's URL when srv is nil (a server process)
}

// url returns the server's URL.
func (e *env) url() string {
	if e.srv == nil {
		return e.addr
	}
	return e.srv.URL()
}

func newEnv(t testing.TB, partitions int) *env {
	t.Helper()
	srv, err := jstest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, js, err := jetstream.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	e := &env{srv: srv, nc: nc, js: js, topo: jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: partitions}}
	cfg, err := e.topo.StreamConfig()
	require.NoError(t, err)
	cfg.Storage = natsjs.MemoryStorage // the server outlives every consumer process of a test
	_, err = js.CreateStream(ctx(t), cfg)
	require.NoError(t, err)
	return e
}

// sub returns the subscription of e's stream owning owned (nil for a
// dynamic assignment).
func (e *env) sub(owned []int32) jetstream.Subscription {
	return jetstream.Subscription{JetStream: e.js, Topology: e.topo, Owned: owned}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// publish publishes perKey exchanges for each of keys aggregates,
// interleaved, and waits until the stream stored them all.
func (e *env) publish(t testing.TB, keys, perKey int) {
	t.Helper()
	require.NoError(t, e.publishAll(ctx(t), keys, perKey))
}

// publishAll is publish for any goroutine. It publishes without waiting for
// each acknowledgement (core NATS publish: the stream stores what arrives,
// in order per connection), then polls the stream's count.
func (e *env) publishAll(ctx context.Context, keys, perKey int) error {
	return e.publishN(ctx, keys, keys*perKey)
}

// publishN publishes n exchanges round-robin over keys aggregates: the
// i-th is sequence i/keys+1 of aggregate i%keys.
func (e *env) publishN(ctx context.Context, keys, n int) error {
	return e.publishFrom(ctx, keys, 0, n)
}

// publishFrom publishes exchanges from to from+n-1 of the round-robin
// order of publishN.
func (e *env) publishFrom(ctx context.Context, keys, from, n int) error {
	s, err := e.js.Stream(ctx, e.topo.Stream)
	if err != nil {
		return err
	}
	before := s.CachedInfo().State.Msgs
	for i := from; i < from+n; i++ {
		if err := e.nc.PublishMsg(e.topo.NewMsg(keyName(i%keys), encodeSeq(uint64(i/keys+1)))); err != nil {
			return err
		}
	}
	if err := e.nc.FlushWithContext(ctx); err != nil {
		return err
	}
	want := before + uint64(n)
	for {
		info, err := s.Info(ctx)
		switch {
		case err != nil:
			return err
		case info.State.Msgs == want:
			return nil
		case info.State.Msgs > want:
			return fmt.Errorf("the stream stored %d, want %d", info.State.Msgs, want)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the stream stored %d of %d: %w", info.State.Msgs, want, ctx.Err())
		case <-time.After(5 * time.Millisecond): // polling the server's progress
		}
	}
}

func keyName(k int) string { return fmt.Sprintf("key-%d", k) }

// ackFloor returns partition p's ack floor, by the server.
func (e *env) ackFloor(t testing.TB, durable string, p int32) uint64 {
	t.Helper()
	info, err := e.js.Consumer(ctx(t), e.topo.Stream, fmt.Sprintf("%s-%d", durable, p))
	require.NoError(t, err)
	return info.CachedInfo().AckFloor.Stream
}

// lastSeq returns the stream's last sequence of partition p's subject.
func (e *env) lastSeq(t testing.TB, p int32) uint64 {
	t.Helper()
	s, err := e.js.Stream(ctx(t), e.topo.Stream)
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(ctx(t), e.topo.Subject(p))
	require.NoError(t, err)
	return m.Sequence
}

// keysOf returns the test aggregates of partition p.
func keysOf(topo jetstream.Topology, keys int, p int32) []string {
	var out []string
	for k := range keys {
		if topo.PartitionOf(keyName(k)) == p {
			out = append(out, keyName(k))
		}
	}
	return out
}

func noop(context.Context, partition.Delivery[keyed]) error { return nil }

func newTestConsumer(t *testing.T, e *env, owned []int32, opts ...jetstream.Option) *jetstream.Consumer[keyed] {
	t.Helper()
	c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, noop, opts...)
	require.NoError(t, err)
	return c
}
