package jetstream_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// oldServer is a NATS protocol peer on a loopback port that says it is a
// JetStream-enabled nats-server of the given version: it sends INFO, answers
// PING with PONG and ignores everything else (a request to the JetStream API
// is never answered). It returns its URL; it stops at the test's end.
func oldServer(t *testing.T, version string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed at the test's end
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				_, _ = conn.Write([]byte(`INFO {"server_id":"OLD","server_name":"old","version":"` + version +
					`","proto":1,"go":"go1.19","host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576,"jetstream":true}` + "\r\n"))
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "PING") {
						_, _ = conn.Write([]byte("PONG\r\n"))
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "nats://" + l.Addr().String()
}

// Debian's nats-server 2.9.10 has no consumer reset API: Connect refuses it
// at once, naming the version found and the one needed, instead of a
// request timing out later as if the server were unreachable.
func TestConnectToAnOldServerFailsAtOnce(t *testing.T) {
	url := oldServer(t, "2.9.10")
	start := time.Now()
	nc, _, err := jetstream.Connect(url)
	took := time.Since(start)
	if nc != nil {
		nc.Close()
	}
	require.ErrorIs(t, err, jetstream.ErrServerVersion)
	require.NotErrorIs(t, err, jetstream.ErrUnreachable)
	require.ErrorContains(t, err, "2.9.10")
	require.ErrorContains(t, err, jetstream.MinServerVersion)
	require.Nil(t, nc, "no connection is returned with the error")
	require.Less(t, took, jetstream.DefaultRequestTimeout/5, "refused on the server's INFO, not after a request's timeout")
	t.Logf("refused in %v: %v", took, err)
}

// A JetStream handle made elsewhere on an old server is refused by
// NewConsumer, which sends nothing: the connection's INFO has the version.
func TestNewConsumerOnAnOldServer(t *testing.T) {
	nc, err := nats.Connect(oldServer(t, "2.11.4"))
	require.NoError(t, err)
	defer nc.Close()
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	topo := jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: 2}
	_, err = jetstream.NewConsumer("c", jetstream.Subscription{JetStream: js, Topology: topo, Owned: []int32{0}},
		named, newSched(t), keyedCodec, noop)
	require.ErrorIs(t, err, jetstream.ErrServerVersion)
	require.ErrorContains(t, err, "2.11.4")
	require.ErrorContains(t, err, `consumer "c"`)
}

// A version that cannot be read is refused too: the consumer cannot tell
// that the server has the APIs it needs.
func TestConnectToAServerOfAnUnreadableVersion(t *testing.T) {
	_, _, err := jetstream.Connect(oldServer(t, "latest"))
	require.ErrorIs(t, err, jetstream.ErrServerVersion)
	require.ErrorContains(t, err, `"latest"`)
}

// A server of the version needed, or later, is accepted (a pre-release
// counts as its release).
func TestConnectToACurrentServer(t *testing.T) {
	for _, v := range []string{jetstream.MinServerVersion, "2.14.0-RC.2", "2.15.2", "3.0.0"} {
		nc, _, err := jetstream.Connect(oldServer(t, v))
		require.NoError(t, err, v)
		nc.Close()
	}
}

// A URL that cannot be parsed is a bad argument, not an unreachable server.
func TestConnectToAMalformedURL(t *testing.T) {
	for _, url := range []string{"not a url", "nats://host:port", "nats://a:4222,nats://[::1", ""} {
		_, _, err := jetstream.Connect(url)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, "%q", url)
		require.NotErrorIs(t, err, jetstream.ErrUnreachable, "%q", url)
		require.ErrorContains(t, err, `"`+url+`"`)
	}
}

// A Prepare whose own ctx ended is told so, not that the server is
// unreachable: a caller retrying on ErrUnreachable would retry its own
// deadline.
func TestPrepareWhoseContextEndedIsNotUnreachable(t *testing.T) {
	e := newEnv(t, 2)
	c := newTestConsumer(t, e, []int32{0})
	ended, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := c.Prepare(ended)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, jetstream.ErrUnreachable)
	<-c.Done()
}

func TestConnectToAnUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "nats://" + l.Addr().String()
	require.NoError(t, l.Close()) // nobody listens there any more
	_, _, err = jetstream.Connect(url, nats.Timeout(time.Second))
	require.ErrorIs(t, err, jetstream.ErrUnreachable)
	require.ErrorContains(t, err, url)
}
