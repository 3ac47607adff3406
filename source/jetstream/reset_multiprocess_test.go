package jetstream_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// The server process of the restart tests: this binary re-executed as a
// nats-server (the module's own) with JetStream in a store directory that
// outlives it, on a fixed port, so that a restarted server is the same one
// to its clients. SIGTERM shuts it down gracefully.
const (
	envServe = "AGGFLOW_JETSTREAM_SERVE" // the store directory: run as the server
	envPort  = "AGGFLOW_JETSTREAM_PORT"
)

func runServer() int {
	port, err := strconv.Atoi(os.Getenv(envPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true,
		StoreDir: os.Getenv(envServe), NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		fmt.Fprintln(os.Stderr, "server: not ready")
		return 1
	}
	fmt.Println("ready")
	<-sigs
	srv.Shutdown()
	srv.WaitForShutdown()
	return 0
}

// serverProc is a server process.
type serverProc struct{ cmd *exec.Cmd }

// startServer starts a server process on port with its store in dir and
// returns once it accepts connections.
func startServer(t *testing.T, port int, dir string) *serverProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envServe+"="+dir, envPort+"="+strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() { // read to the end, so that Wait returns
		}
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "the server process did not start")
	case <-time.After(30 * time.Second):
		t.Fatal("the server process did not get ready")
	}
	return &serverProc{cmd: cmd}
}

// stop signals the server and waits for its exit.
func (s *serverProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(sig))
	err := s.cmd.Wait()
	if sig == syscall.SIGTERM {
		require.NoError(t, err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The restart: a consumer process owns the 8 partitions of a file-stored
// stream on a server process, which is killed (SIGKILL) for 2 s, then
// shut down gracefully for 1 s, each time with exchanges delivered and not
// acknowledged, and restarted on its port and store. The consumer must ride
// both out: it does not stop, loses nothing, keeps every aggregate's order,
// and its replays are redeliveries (attempt 2 or more). Static, and as the
// only member of a dynamic assignment (its leases, in a bucket of the same
// server, of a TTL above the outage).
func TestServerRestartIsRiddenOut(t *testing.T) {
	t.Run("static", func(t *testing.T) { serverRestart(t, false) })
	t.Run("dynamic", func(t *testing.T) { serverRestart(t, true) })
}

func serverRestart(t *testing.T, dynamic bool) {
	const keys, perKey = 400, 100
	total := keys * perKey
	port, dir := freePort(t), t.TempDir()
	srv := startServer(t, port, dir)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	nc, js, err := jetstream.Connect(url, reconnecting...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	e := &env{nc: nc, js: js, topo: jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: mpPartitions}, addr: url}
	cfg, err := e.topo.StreamConfig()
	require.NoError(t, err)
	cfg.Storage = natsjs.FileStorage // it outlives the server process
	_, err = js.CreateStream(ctx(t), cfg)
	require.NoError(t, err)
	e.publish(t, keys, perKey)

	out := filepath.Join(t.TempDir(), "records")
	deadline := time.Now().Add(mpDeadline)
	var c *proc
	fields := 3
	if dynamic {
		c = startChild(t, e, "", out, false, envWork+"=200us", envMember+"=a", envTTL+"=20s")
		fields = 5
	} else {
		c = startChild(t, e, allOwned, out, false, envWork+"=200us")
	}
	keysOf := make([]string, keys)
	for k := range keysOf {
		keysOf[k] = keyName(k)
	}
	connected := func() bool { return nc.IsConnected() }
	restart := func(sig syscall.Signal, down time.Duration, at int) (outage time.Duration) {
		waitFor(t, deadline, fmt.Sprintf("%d handled", at), func() bool { return c.lines() >= at }, c)
		pending := e.ackPending(t, allOwned)
		require.Positive(t, pending, "exchanges delivered and not acknowledged at the stop")
		srv.stop(t, sig)
		stopped := time.Now()
		hold(stopped, down)
		srv = startServer(t, port, dir)
		up := time.Now()
		before := c.lines()
		waitFor(t, deadline, "a message handled after the restart", func() bool { return c.lines() > before }, c)
		outage = time.Since(up)
		t.Logf("%v: %d delivered and not acknowledged at the stop, down %v, first handled %v after the server was up",
			sig, pending, up.Sub(stopped).Round(time.Millisecond), outage.Round(time.Millisecond))
		waitFor(t, deadline, "the test's connection back", connected, c)
		return outage
	}
	killed := restart(syscall.SIGKILL, 2*time.Second, total/5)
	shut := restart(syscall.SIGTERM, time.Second, total*3/5)
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, c)
	c.stop(t, syscall.SIGTERM)
	stderr := c.stderr()
	require.NotContains(t, stderr, "consumer failed")
	var run []handled
	readLines(t, out, fields, func(h handled, _ [][]byte) { run = append(run, h) })
	r := checkReplays([][]handled{run}, keysOf, perKey)
	stats := stderr
	if i := strings.LastIndex(stats, "stats: "); i >= 0 {
		stats = stats[i:]
	}
	t.Logf("outages %v (kill) and %v (graceful); %+v; %s", killed.Round(time.Millisecond), shut.Round(time.Millisecond), r, stats)
	require.Zero(t, r.lost, "every exchange handled")
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.Less(t, killed, 20*time.Second, "a bound on a loaded machine; the goal is twice the downtime")
	require.Less(t, shut, 20*time.Second)
}
