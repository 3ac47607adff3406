package jetstream_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// A server lost while the consumer runs, and not back within the server
// loss timeout, fails the consumer with ErrUnreachable naming the
// partition, not before that timeout (a server back within it is ridden
// out: TestServerRestartIsRiddenOut).
func TestServerLostWhileRunning(t *testing.T) {
	const wait = 2 * time.Second
	e := newEnv(t, 2)
	e.publish(t, 10, 10)
	c := newTestConsumer(t, e, []int32{0, 1}, jetstream.WithServerLossTimeout(wait))
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	start := time.Now()
	e.srv.Shutdown()
	select {
	case <-c.Done():
	case <-ctx(t).Done():
		t.Fatal("the consumer did not stop after losing its server")
	}
	stopped := time.Since(start)
	require.ErrorIs(t, c.Err(), jetstream.ErrUnreachable)
	require.ErrorContains(t, c.Err(), "partition")
	require.GreaterOrEqual(t, stopped, wait, "it waited for the server to come back")
	t.Logf("stopped %v after the server: %v", stopped.Round(time.Millisecond), c.Err())
}
