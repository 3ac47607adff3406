package jstest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// publishOne makes stream S (if needed) on s and publishes one message to
// it; it returns the message's stream sequence.
func publishOne(t *testing.T, s *jstest.Server) uint64 {
	t.Helper()
	nc, err := nats.Connect(s.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "s.1", []byte("x"))
	require.NoError(t, err)
	return ack.Sequence
}

func TestStartServesJetStreamAndCleansUp(t *testing.T) {
	s, err := jstest.Start()
	require.NoError(t, err)
	dir := s.StoreDir()
	require.Equal(t, uint64(1), publishOne(t, s))
	s.Shutdown()
	s.Shutdown() // idempotent
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestStoreDirSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	s, err := jstest.Start(jstest.WithStoreDir(dir))
	require.NoError(t, err)
	require.Equal(t, uint64(1), publishOne(t, s))
	s.Shutdown()

	s, err = jstest.Start(jstest.WithStoreDir(dir))
	require.NoError(t, err)
	defer s.Shutdown()
	require.Equal(t, uint64(2), publishOne(t, s), "the stream kept its first message")
}
