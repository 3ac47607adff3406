package jetstream_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The multi-process tests: the server in the test process, two consumer
// processes (this binary re-executed as runChild) owning 4 of 8 partitions
// each, 100,000 keyed exchanges (1,000 aggregates of 100 sequences)
// published before they start.
const (
	mpPartitions = 8
	mpKeys       = 1000
	mpPerKey     = 100
	mpDeadline   = 150 * time.Second // a bound: a run takes 5 s, 17-25 s under the race detector
)

var (
	ownedA = "0,1,2,3"
	ownedB = "4,5,6,7"
)

// proc is a child consumer process.
type proc struct {
	cmd     *exec.Cmd
	out     string // the records
	errPath string // its standard error
}

// stderr returns what the child wrote to its standard error.
func (p *proc) stderr() string {
	data, _ := os.ReadFile(p.errPath)
	return string(data)
}

func startChild(t *testing.T, e *env, own, out string, control bool, extra ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0]), out: out}
	p.cmd.Env = append(os.Environ(), envChild+"=1", envURL+"="+e.url(), envOwn+"="+own,
		envPartitions+"="+strconv.Itoa(mpPartitions), envOut+"="+out)
	if control {
		p.cmd.Env = append(p.cmd.Env, envControl+"=1")
	}
	p.cmd.Env = append(p.cmd.Env, extra...)
	p.errPath = out + ".stderr"
	for _, kv := range extra {
		member, ok := strings.CutPrefix(kv, envMember+"=")
		if !ok {
			member, ok = strings.CutPrefix(kv, envStatic+"=")
		}
		if ok {
			p.errPath = out + "." + member + ".stderr" // members may share their records' file
		}
	}
	stderr, err := os.Create(p.errPath)
	require.NoError(t, err)
	defer stderr.Close() // the child has its own descriptor
	p.cmd.Stderr = stderr
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// lines returns how many records the child wrote so far.
func (p *proc) lines() int {
	data, _ := os.ReadFile(p.out)
	return bytes.Count(data, []byte{'\n'})
}

// stop signals the child and waits for its exit; SIGTERM must end it
// cleanly (a graceful stop), SIGKILL ends it anyhow.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	err := p.cmd.Wait()
	if sig == syscall.SIGTERM {
		require.NoError(t, err, "child stderr: %s", p.stderr())
	}
}

// waitFor polls cond until it holds or the deadline passes; then it fails
// with the children's error output.
func waitFor(t *testing.T, deadline time.Time, what string, cond func() bool, children ...*proc) {
	t.Helper()
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range children {
				t.Logf("child %s: %s", p.out, p.stderr())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling another process's progress
	}
}

// drained reports whether every partition's ack floor reached its last
// sequence.
func (e *env) drained(t *testing.T) bool {
	for p := range int32(mpPartitions) {
		if e.ackFloor(t, childDurable, p) != e.lastSeq(t, p) {
			return false
		}
	}
	return true
}

// mpBacklog is what the control's A holds fetched and not handled when it is
// killed: half its pending budget.
const mpBacklog = 256

// ackPending returns how many messages the server delivered on the
// partitions own ("0,1,...") and has not seen acknowledged.
func (e *env) ackPending(t *testing.T, own string) int {
	t.Helper()
	n := 0
	for _, s := range strings.Split(own, ",") {
		info, err := e.js.Consumer(ctx(t), e.topo.Stream, childDurable+"-"+s)
		require.NoError(t, err)
		n += info.CachedInfo().NumAckPending
	}
	return n
}

func allKeys() []string {
	keys := make([]string, mpKeys)
	for k := range keys {
		keys[k] = keyName(k)
	}
	return keys
}

// handoff runs the scenario: A and B consume; once A handled a fifth of
// its share, A is stopped by sig and a new A takes its partitions over;
// when every partition is acknowledged to its end, both stop gracefully.
// It returns the check of the records, A's runs first.
func handoff(t *testing.T, sig syscall.Signal, control bool) report {
	e := newEnv(t, mpPartitions)
	dir := t.TempDir()
	deadline := time.Now().Add(mpDeadline)
	start := time.Now()
	published := make(chan error, 1)
	pubCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() { published <- e.publishAll(pubCtx, mpKeys, mpPerKey) }() // the consumers read meanwhile
	if control {
		// The control's A is killed with a backlog fetched and not handled,
		// which a consumer that keeps pace with the publisher may not have:
		// then nothing is lost and the control proves nothing.
		require.NoError(t, <-published)
		published <- nil
	}
	var stall []string
	if control {
		// ... and its handlers stop at that point, so that the backlog is
		// there however fast A handles on this machine.
		stall = []string{envStallAfter + "=" + strconv.Itoa(mpKeys*mpPerKey/10)}
	}
	a := startChild(t, e, ownedA, filepath.Join(dir, "a1"), control, stall...)
	b := startChild(t, e, ownedB, filepath.Join(dir, "b"), control)
	waitFor(t, deadline, "A to handle a fifth of its share", func() bool { return a.lines() >= mpKeys*mpPerKey/10 }, a, b)
	if control {
		waitFor(t, deadline, "A to hold a backlog", func() bool { return e.ackPending(t, ownedA) >= mpBacklog }, a, b)
	}
	holderA := e.owners(t)[0] // A's member name, on its leases
	stopped := time.Now()
	a.stop(t, sig)
	handledByA := a.lines()
	a2 := startChild(t, e, ownedA, filepath.Join(dir, "a2"), control)
	waitFor(t, deadline, "the new A to hold A's partitions", func() bool {
		for _, o := range e.owners(t)[:4] { // ownedA
			if o == "" || o == holderA {
				return false
			}
		}
		return true
	}, a2, b)
	t.Logf("the new A held A's partitions %v after A was stopped by %v", time.Since(stopped).Round(time.Millisecond), sig)
	require.NoError(t, <-published)
	t.Logf("published %d exchanges in %v", mpKeys*mpPerKey, time.Since(start).Round(time.Millisecond))
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, a2, b)
	a2.stop(t, syscall.SIGTERM)
	b.stop(t, syscall.SIGTERM)
	r := checkRuns([][]handled{readRun(t, a.out), readRun(t, a2.out), readRun(t, b.out)}, allKeys(), mpPerKey)
	t.Logf("%v in all: A handled %d before %v; %+v", time.Since(start).Round(time.Millisecond), handledByA, sig, r)
	return r
}

func TestMultiProcessKillReplaysInOrderAndLosesNothing(t *testing.T) {
	r := handoff(t, syscall.SIGKILL, false)
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.GreaterOrEqual(t, r.records, mpKeys*mpPerKey)
}

func TestMultiProcessGracefulHandoffHasNoDuplicate(t *testing.T) {
	r := handoff(t, syscall.SIGTERM, false)
	r.redelivered = 0 // fetched by A and never handled: counted as attempts, conservatively
	require.Equal(t, report{records: mpKeys * mpPerKey}, r, "every exchange handled exactly once, in order")
}

// The control: a consumer that resumes from the server's delivery state
// instead of resetting to the ack floor is caught by the same checks. With
// AckAll, the restarted process's first cumulative acknowledgement covers
// what the killed one had fetched and not handled, so it is lost; were it
// redelivered by the ack wait instead, it would come after newer exchanges
// of its aggregates.
func TestMultiProcessControlWithoutResetIsCaught(t *testing.T) {
	r := handoff(t, syscall.SIGKILL, true)
	require.Positive(t, r.lost+r.violations, "the checks must catch a consumer that does not reset: %+v", r)
}
