package jetstream_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A server lost while the consumer runs fails it with an error naming the
// partition, within the request timeout and a pull's expiry; what was
// handled stays handled.
func TestServerLostWhileRunning(t *testing.T) {
	e := newEnv(t, 2)
	e.publish(t, 10, 10)
	c := newTestConsumer(t, e, []int32{0, 1})
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	start := time.Now()
	e.srv.Shutdown()
	select {
	case <-c.Done():
	case <-ctx(t).Done():
		t.Fatal("the consumer did not stop after losing its server")
	}
	require.ErrorContains(t, c.Err(), "pulling")
	t.Logf("stopped %v after the server: %v", time.Since(start).Round(time.Millisecond), c.Err())
}
