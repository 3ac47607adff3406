package jetstream_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The multi-process tests of the dynamic assignment: the children are
// members "a" and "b" of the durable prefix childDurable, over 8
// partitions, appending their records to one shared file. The scheduler of
// a child runs 2 handlers at once.
const (
	dynTTL      = 2 * time.Second
	dynHandlers = 2
)

func startMember(t *testing.T, e *env, member, out string, ttl time.Duration, noFence bool) *proc {
	t.Helper()
	extra := []string{envMember + "=" + member, envTTL + "=" + ttl.String()}
	if noFence {
		extra = append(extra, envNoFence+"=1")
	}
	return startChild(t, e, "", out, false, extra...)
}

// owners returns each partition's lease holder, "" for none.
func (e *env) owners(t testing.TB) []string {
	t.Helper()
	return e.leaseHolders(t, childDurable, mpPartitions)
}

func itoa(p int) string { return string(rune('0' + p)) } // 8 partitions

// ownsAll reports whether member holds every lease.
func (e *env) ownsAll(t testing.TB, member string) bool {
	for _, o := range e.owners(t) {
		if o != member {
			return false
		}
	}
	return true
}

// ownsSome reports whether member holds at least one lease.
func (e *env) ownsSome(t testing.TB, member string) bool {
	for _, o := range e.owners(t) {
		if o == member {
			return true
		}
	}
	return false
}

// pair is members a and b started while keys x perKey exchanges are
// published (with backlog, once they are), once they share the partitions.
type pair struct {
	e               *env
	out             string
	deadline, start time.Time
	published       <-chan error
	a, b            *proc
}

func startPair(t *testing.T, keys, perKey int, noFence, backlog bool) pair {
	t.Helper()
	pr := pair{e: newEnv(t, mpPartitions), out: filepath.Join(t.TempDir(), "records"),
		deadline: time.Now().Add(mpDeadline), start: time.Now()}
	published := make(chan error, 1)
	pubCtx, cancel := context.WithDeadline(context.Background(), pr.deadline)
	t.Cleanup(cancel)
	go func() { published <- pr.e.publishAll(pubCtx, keys, perKey) }()
	if backlog {
		require.NoError(t, <-published)
		published <- nil
	}
	pr.published = published
	pr.a = startMember(t, pr.e, "a", pr.out, dynTTL, noFence)
	pr.b = startMember(t, pr.e, "b", pr.out, dynTTL, noFence)
	t.Cleanup(func() { // the members' claims and losses, when a check failed
		if t.Failed() {
			t.Logf("member a:\n%s\nmember b:\n%s", pr.a.stderr(), pr.b.stderr())
		}
	})
	waitFor(t, pr.deadline, "a and b to share the partitions",
		func() bool { return pr.e.ownsSome(t, "a") && pr.e.ownsSome(t, "b") }, pr.a, pr.b)
	return pr
}

// Kill: a and b share the partitions; a is killed (not restarted) once a
// tenth of the exchanges is handled; b claims a's partitions when their
// leases expire and replays them from their ack floors.
func TestMultiProcessDynamicKillFailsOver(t *testing.T) {
	pr := startPair(t, mpKeys, mpPerKey, false, false)
	e, out, deadline, start, published, a, b := pr.e, pr.out, pr.deadline, pr.start, pr.published, pr.a, pr.b
	waitFor(t, deadline, "a tenth handled", func() bool { return a.lines() >= mpKeys*mpPerKey/10 }, a, b)
	killed := time.Now()
	a.stop(t, syscall.SIGKILL)
	waitFor(t, deadline, "b to own every partition", func() bool { return e.ownsAll(t, "b") }, b)
	failover := time.Since(killed)
	require.NoError(t, <-published)
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, b)
	b.stop(t, syscall.SIGTERM)
	r := checkEpochs(readRecords(t, out), allKeys(), mpPerKey)
	t.Logf("%v in all; b owned every partition %v after a was killed; %+v", time.Since(start).Round(time.Millisecond),
		failover.Round(time.Millisecond), r)
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.Zero(t, r.stale, "nothing handled by a after it was killed")
}

// The fence: a is stopped (SIGSTOP) while it consumes, long enough for b to
// claim its partitions, then continued. It must hand nothing more of them
// to its handlers (but for the handlers running when it stopped: one each
// at most) nor acknowledge, and it rejoins. The records are 20,000
// exchanges (200 aggregates of 100).
func stalled(t *testing.T, noFence bool) (epochReport, int) {
	const keys, perKey = 200, 100
	// a stops with a backlog fetched and not handled: a member that kept pace
	// with the publisher would have nothing left to handle after it, and
	// neither the fence nor its control would prove anything.
	pr := startPair(t, keys, perKey, noFence, true)
	e, out, deadline, start, published, a, b := pr.e, pr.out, pr.deadline, pr.start, pr.published, pr.a, pr.b
	waitFor(t, deadline, "a to handle some", func() bool { return a.lines() >= keys*perKey/20 }, a, b)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	waitFor(t, deadline, "b to own every partition", func() bool { return e.ownsAll(t, "b") }, a, b)
	claimed := time.Since(stopped)
	before := handledBy(t, out, "a")
	// b handles some of its new partitions first (from their ack floors:
	// the keys of a's backlog), so that what a hands its handlers after it
	// goes on is of an epoch below one seen before for its key: stale, which
	// is what the checks look for; otherwise, on a loaded machine, a could
	// get through its backlog before b reached those keys.
	bBefore := handledBy(t, out, "b")
	waitFor(t, deadline, "b to handle some of its new partitions", func() bool { return handledBy(t, out, "b") >= bBefore+2*keys }, a, b)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	require.NoError(t, <-published)
	if noFence {
		// The control's a goes on with what it had fetched (its backlog:
		// hundreds); it is killed once it handled some of it, since it never
		// gives its partitions up.
		waitFor(t, time.Now().Add(10*time.Second), "a to go on", func() bool { return handledBy(t, out, "a") > before+10 }, a, b)
		a.stop(t, syscall.SIGKILL)
	}
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, a, b)
	if !noFence {
		a.stop(t, syscall.SIGTERM)
	}
	b.stop(t, syscall.SIGTERM)
	r := checkEpochs(readRecords(t, out), allKeysOf(keys), perKey)
	lost := strings.Count(a.stderr(), "partition lost")
	t.Logf("%v in all; b owned every partition %v after a stopped; a lost %d partitions; %+v", time.Since(start).Round(time.Millisecond),
		claimed.Round(time.Millisecond), lost, r)
	return r, lost
}

func TestMultiProcessDynamicStalledOwnerIsFenced(t *testing.T) {
	r, lost := stalled(t, false)
	require.Positive(t, lost, "a lost the partitions b claimed")
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.LessOrEqual(t, r.stale, dynHandlers, "only the handlers running when a stopped may finish after")
}

// The control: without the fence the stalled owner goes on handling what
// it had fetched after b claimed its partitions, and the checks see it.
func TestMultiProcessDynamicControlWithoutFenceIsCaught(t *testing.T) {
	r, _ := stalled(t, true)
	require.Greater(t, r.stale, dynHandlers, "the checks must catch a stalled owner that is not fenced: %+v", r)
}

// Join: a owns every partition; b starts while a consumes: a hands half
// over gracefully, and no exchange is handled twice. 40,000 exchanges (200
// aggregates of 200): a quarter before a starts, then batches at a pace
// until b owns a partition, then the rest, so that the handoff happens
// while the exchanges flow.
func TestMultiProcessDynamicJoinHandsOffWithoutDuplicate(t *testing.T) {
	const keys, perKey, batch = 200, 200, 200
	e := newEnv(t, mpPartitions)
	out := filepath.Join(t.TempDir(), "records")
	deadline := time.Now().Add(mpDeadline)
	start := time.Now()
	e.publish(t, keys, perKey/4)
	a := startMember(t, e, "a", out, 3*time.Second, false)
	waitFor(t, deadline, "a to own every partition", func() bool { return e.ownsAll(t, "a") }, a)
	b := startMember(t, e, "b", out, 3*time.Second, false)
	joined := time.Now()
	next := keys * perKey / 4
	pace := time.NewTicker(25 * time.Millisecond) // 8,000 exchanges a second: a load, not a synchronisation
	defer pace.Stop()
	for ; !e.ownsSome(t, "b") && next < keys*perKey*3/4; next += batch {
		require.NoError(t, e.publishFrom(ctx(t), keys, next, batch))
		<-pace.C
	}
	handoff := time.Since(joined)
	require.NoError(t, e.publishFrom(ctx(t), keys, next, keys*perKey-next))
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, a, b)
	a.stop(t, syscall.SIGTERM)
	b.stop(t, syscall.SIGTERM)
	recs := readRecords(t, out)
	byB := 0
	for _, h := range recs {
		if h.member == "b" {
			byB++
		}
	}
	r := checkEpochs(recs, allKeysOf(keys), perKey)
	t.Logf("%v in all; b owned a partition %v after it started (%d published meanwhile) and handled %d; %+v",
		time.Since(start).Round(time.Millisecond), handoff.Round(time.Millisecond), next-keys*perKey/4, byB, r)
	require.Positive(t, byB, "b handled some after the handoff")
	r.redelivered = 0 // fetched by a and never handled: counted as attempts, conservatively
	require.Equal(t, epochReport{report: report{records: keys * perKey}}, r, "every exchange handled exactly once, in order")
}

// handledBy counts member's records in the shared file (lines counts
// every member's), while the members write to it: complete lines only.
func handledBy(t *testing.T, out, member string) int {
	t.Helper()
	data, err := os.ReadFile(out)
	if os.IsNotExist(err) {
		return 0 // nothing written yet
	}
	require.NoError(t, err)
	return bytes.Count(data, []byte(" "+member+"\n"))
}

func allKeysOf(n int) []string {
	keys := make([]string, n)
	for k := range keys {
		keys[k] = keyName(k)
	}
	return keys
}
