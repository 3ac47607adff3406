package jetstream_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// The multi-process tests of exclusive static ownership: two processes
// given the same partitions by mistake (the same durable prefix, the same
// Subscription.Owned). 20,000 exchanges (200 aggregates of 100) over the 8
// partitions, which both children own.
const (
	stKeys, stPerKey = 200, 100
	stOwned          = "0,1,2,3,4,5,6,7"
)

// exit waits up to d for the child to exit and returns its error (nil for
// status 0); false if it did not, and then it is killed.
func (p *proc) exit(d time.Duration) (bool, error) {
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-done
		return false, nil
	}
}

// heldBy reports whether every partition's lease is held, all by one member,
// and which.
func (e *env) heldBy(t testing.TB) (string, bool) {
	owners := e.owners(t)
	for _, o := range owners {
		if o == "" || o != owners[0] {
			return "", false
		}
	}
	return owners[0], true
}

// The second process is refused: it waits for the partitions (their holder
// may have crashed, its leases expiring), then fails with ErrOwned naming a
// partition and its holder, having handled nothing; the first goes on alone,
// and nothing is lost, reordered or handled twice.
func TestMultiProcessStaticSameOwnedIsRefused(t *testing.T) {
	e := newEnv(t, mpPartitions)
	dir := t.TempDir()
	deadline := time.Now().Add(mpDeadline)
	start := time.Now()
	published := make(chan error, 1)
	pubCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() { published <- e.publishAll(pubCtx, stKeys, stPerKey) }() // A reads meanwhile
	a := startChild(t, e, stOwned, filepath.Join(dir, "a"), false)
	waitFor(t, deadline, "A to handle some", func() bool { return a.lines() > 0 }, a)
	waitFor(t, deadline, "A to hold every partition", func() bool { _, ok := e.heldBy(t); return ok }, a)
	b := startChild(t, e, stOwned, filepath.Join(dir, "b"), false)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("A:\n%s\nB:\n%s", a.stderr(), b.stderr())
		}
	})
	began := time.Now()
	exited, err := b.exit(60 * time.Second) // B's wait is twice the default TTL: 10 s
	refused := time.Since(began)
	if !exited {
		r := checkRuns([][]handled{readRun(t, a.out), readRun(t, b.out)}, allKeysOf(stKeys), stPerKey)
		t.Fatalf("B must be refused, not run beside A: it handled %d in %v; A and B so far: %+v", b.lines(), refused.Round(time.Millisecond), r)
	}
	holder, held := e.heldBy(t)
	require.True(t, held, "A holds every partition")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "B fails")
	require.Contains(t, b.stderr(), jetstream.ErrOwned.Error(), "B's error names the refusal")
	require.Contains(t, b.stderr(), holder, "... and the holder")
	require.Zero(t, b.lines(), "B handled nothing")
	require.NoError(t, <-published)
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, a)
	a.stop(t, syscall.SIGTERM)
	r := checkRuns([][]handled{readRun(t, a.out), readRun(t, b.out)}, allKeysOf(stKeys), stPerKey)
	t.Logf("%v in all; B refused %v after it started: %s; %+v", time.Since(start).Round(time.Millisecond),
		refused.Round(time.Millisecond), lastLine(b.stderr()), r)
	require.Equal(t, report{records: stKeys * stPerKey}, r, "every exchange handled once, in order, by A")
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The stalled static owner: A owns the partitions and B, given the same,
// waits for them; A is stopped (SIGSTOP) with a backlog fetched and not
// handled, past its lease's TTL: B claims the partitions and replays them
// from their ack floors. Continued, A hands nothing more to its handlers
// (but for those running when it stopped: one each at most) nor
// acknowledges, and fails with ErrLeaseLost (static ownership is not
// handed around), while B goes on to the end.
func TestMultiProcessStaticStalledOwnerIsFencedAndFails(t *testing.T) {
	const ttl = 2 * time.Second
	e := newEnv(t, mpPartitions)
	out := filepath.Join(t.TempDir(), "records") // both write to it: its order is the order the handlers ran in
	deadline := time.Now().Add(mpDeadline)
	start := time.Now()
	e.publish(t, stKeys, stPerKey) // a backlog: A cannot keep pace with the publisher and have nothing left
	member := func(name string) []string {
		return []string{envStatic + "=" + name, envTTL + "=" + ttl.String(), envWait + "=" + (30 * time.Second).String()}
	}
	a := startChild(t, e, stOwned, out, false, member("a")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("A:\n%s", a.stderr())
		}
	})
	waitFor(t, deadline, "A to handle some", func() bool { return handledBy(t, out, "a") >= stKeys*stPerKey/20 }, a)
	waitFor(t, deadline, "A to hold every partition", func() bool { o, ok := e.heldBy(t); return ok && o == "a" }, a)
	b := startChild(t, e, stOwned, out, false, member("b")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("B:\n%s", b.stderr())
		}
	})
	waitFor(t, deadline, "B to wait for A's partitions", func() bool { return strings.Contains(b.stderr(), "waiting") }, a, b)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	unacked := e.ackPending(t, stOwned)
	require.Positive(t, unacked, "A stopped with deliveries not acknowledged")
	waitFor(t, deadline, "B to hold every partition", func() bool { o, ok := e.heldBy(t); return ok && o == "b" }, a, b)
	claimed := time.Since(stopped)
	bBefore := handledBy(t, out, "b")
	// B handles some of the keys of A's backlog first, so that what A would
	// hand its handlers once continued is of an older epoch than a record
	// of its key: stale, which the checks see.
	waitFor(t, deadline, "B to handle some", func() bool { return handledBy(t, out, "b") >= bBefore+2*stKeys }, a, b)
	aBefore := handledBy(t, out, "a")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	exited, err := a.exit(30 * time.Second)
	require.True(t, exited, "A must fail once continued, not go on")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "A fails")
	require.Contains(t, a.stderr(), jetstream.ErrLeaseLost.Error())
	aAfter := handledBy(t, out, "a") - aBefore
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, b)
	b.stop(t, syscall.SIGTERM)
	r := checkEpochs(readRecords(t, out), allKeysOf(stKeys), stPerKey)
	t.Logf("%v in all; %d unacknowledged at the stop; B held every partition %v after A stopped; A handled %d after it was continued and failed: %s; %+v",
		time.Since(start).Round(time.Millisecond), unacked, claimed.Round(time.Millisecond), aAfter, lastLine(a.stderr()), r)
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.LessOrEqual(t, r.stale, dynHandlers, "only the handlers running when A stopped may finish after")
	require.LessOrEqual(t, aAfter, dynHandlers, "A handed nothing more to its handlers")
}
