package jetstream

import (
	"context"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// oneStream starts a server for the test, connects to it and makes a
// memory stream of one partition; the server and the connection end with
// the test.
func oneStream(t *testing.T, ctx context.Context) (natsjs.JetStream, Topology) {
	t.Helper()
	srv, err := jstest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, js, err := Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	topo := Topology{Stream: "EX", Prefix: "ex", Partitions: 1}
	scfg, err := topo.StreamConfig()
	require.NoError(t, err)
	scfg.Storage = natsjs.MemoryStorage
	_, err = js.CreateStream(ctx, scfg)
	require.NoError(t, err)
	return js, topo
}

// keyCodec decodes a message as its key, and groups by it.
var keyCodec = Codec[string]{
	Decode: func(key string, _ natsjs.Msg) (string, error) { return key, nil },
	ID:     func(s string) string { return s },
}
