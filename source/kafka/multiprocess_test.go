package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// handled is one line a member wrote: a record it handled.
type handled struct {
	id        string
	seq       int
	start     int64 // wall clock, ns: one machine, so comparable across members
	epoch     uint64
	partition int32
	offset    int64
	proc      int // which member process, in start order
	line      int // its place in that member's output
}

// run is the parent side of a multi-process test: a kfake cluster in this
// process and members, each this test binary re-executed in child mode.
type run struct {
	t            *testing.T
	cluster      *kafkatest.Cluster
	group        string
	keys, perKey int // what verify expects: mpKeys x mpPerKey unless set

	mu       sync.Mutex
	lines    []handled
	distinct map[[2]any]bool
	progress chan struct{}
	readers  sync.WaitGroup
	members  []*member
}

type member struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	waited chan error
}

// lockedBuffer is a member's stderr: the process writes it while the test
// may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	mpTopic      = "flow"
	mpPartitions = 8
	mpKeys       = 1000
	mpPerKey     = 100 // 100,000 exchanges
	mpBatches    = 10  // produced in batches of 10 sequence numbers per key
	// mpDelay keeps each member's pending budget full, so that a kill
	// catches records in flight above the last commit.
	mpDelay = 100 * time.Microsecond
)

func newRun(t *testing.T) *run {
	c, err := kafkatest.Start(kafkatest.WithTopic(mpTopic, mpPartitions), shortSessions)
	require.NoError(t, err)
	r := &run{t: t, cluster: c, group: "flow-" + t.Name(), keys: mpKeys, perKey: mpPerKey, distinct: map[[2]any]bool{}, progress: make(chan struct{}, 1)}
	t.Cleanup(func() {
		if t.Failed() { // the members' warnings: lapsed leases, refused commits
			for i, m := range r.members {
				for _, line := range strings.Split(m.stderr.String(), "\n") {
					if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
						t.Logf("[%d] %s", i, line)
					}
				}
			}
		}
		for _, m := range r.members {
			_ = m.cmd.Process.Kill()
			<-m.waited
		}
		r.readers.Wait()
		c.Close()
	})
	return r
}

// produce writes batch b: sequence numbers b*perBatch+1 .. (b+1)*perBatch
// of every key, keyed by aggregate id.
func (r *run) produce(b int) {
	per := mpPerKey / mpBatches
	rs := make([]*kgo.Record, 0, mpKeys*per)
	for seq := b*per + 1; seq <= (b+1)*per; seq++ {
		for k := range mpKeys {
			rs = append(rs, &kgo.Record{Key: []byte("acct-" + strconv.Itoa(k)), Value: []byte(strconv.Itoa(seq))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(r.t, r.cluster.Produce(ctx, mpTopic, rs...))
}

// start runs a new member process; env (NAME=value) overrides its
// defaults.
func (r *run) start(env ...string) *member {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=member", brokersEnv+"="+strings.Join(r.cluster.Addrs(), ","),
		groupEnv+"="+r.group, topicEnv+"="+mpTopic, delayEnv+"="+mpDelay.String())
	cmd.Env = append(cmd.Env, env...)
	m := &member{cmd: cmd, waited: make(chan error, 1)}
	cmd.Stderr = &m.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(r.t, err)
	require.NoError(r.t, cmd.Start())
	proc := len(r.members)
	r.members = append(r.members, m)
	r.readers.Add(1)
	go func() {
		defer r.readers.Done()
		r.read(proc, out)
		m.waited <- cmd.Wait()
	}()
	return m
}

func (r *run) read(proc int, out interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(out)
	for n := 0; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 6 {
			continue
		}
		h := handled{id: f[0], proc: proc, line: n}
		h.seq, _ = strconv.Atoi(f[1])
		h.start, _ = strconv.ParseInt(f[2], 10, 64)
		h.epoch, _ = strconv.ParseUint(f[3], 10, 64)
		p, _ := strconv.ParseInt(f[4], 10, 32)
		h.partition = int32(p)
		h.offset, _ = strconv.ParseInt(f[5], 10, 64)
		r.mu.Lock()
		r.lines = append(r.lines, h)
		r.distinct[[2]any{h.id, h.seq}] = true
		r.mu.Unlock()
		select {
		case r.progress <- struct{}{}:
		default:
		}
	}
}

// waitFor waits until n distinct exchanges were handled.
func (r *run) waitFor(n int, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got := len(r.distinct)
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.progress:
		case <-deadline.C:
			require.FailNow(r.t, "timed out", "%d of %d distinct exchanges handled; members' stderr: %s", got, n, r.stderr())
		}
	}
}

// revocations returns how long each member's revocations took (drain
// and commit), from their debug logs.
func (r *run) revocations() []time.Duration {
	var ds []time.Duration
	for _, m := range r.members {
		for _, line := range strings.Split(m.stderr.String(), "\n") {
			if !strings.Contains(line, "partitions revoked, drained and committed") {
				continue
			}
			if i := strings.Index(line, "took="); i >= 0 {
				if d, err := time.ParseDuration(strings.Fields(line[i+len("took="):])[0]); err == nil {
					ds = append(ds, d)
				}
			}
		}
	}
	slices.Sort(ds)
	return ds
}

// syncs returns the wall clock times, ns, at which the group answered
// member proc's SyncGroups (its assignments), in order, from its logs.
func (r *run) syncs(proc int) []int64 {
	var at []int64
	for _, line := range strings.Split(r.members[proc].stderr.String(), "\n") {
		if !strings.Contains(line, syncedMsg) {
			continue
		}
		if i := strings.Index(line, " at="); i >= 0 {
			if ns, err := strconv.ParseInt(strings.Fields(line[i+len(" at="):])[0], 10, 64); err == nil {
				at = append(at, ns)
			}
		}
	}
	return at
}

func (r *run) stderr() string {
	var b strings.Builder
	for i, m := range r.members {
		b.WriteString("\n[" + strconv.Itoa(i) + "] " + m.stderr.String())
	}
	return b.String()
}

// stopGracefully sends SIGTERM to m and requires a clean exit.
func (r *run) stopGracefully(m *member) {
	require.NoError(r.t, m.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-m.waited:
		m.waited <- err // for the cleanup
		require.NoError(r.t, err, "member stderr: %s", m.stderr.String())
	case <-time.After(30 * time.Second):
		require.FailNow(r.t, "member did not stop")
	}
}

// kill sends SIGKILL to m and waits for its end.
func (r *run) kill(m *member) {
	require.NoError(r.t, m.cmd.Process.Signal(syscall.SIGKILL))
	err := <-m.waited
	m.waited <- err
}

// verify stops the members left, then checks per-key order across every
// member by the handlers' start times and returns the duplicates.
func (r *run) verify(alive ...*member) int {
	dups, stale := r.verifyEpochs(alive...)
	require.Zero(r.t, stale, "records handled under a lease older than one that handled their key before")
	return dups
}

// verifyEpochs is verify that leaves the stale records out of the order
// checks and counts them: a record is stale when its lease's epoch is below
// one seen before for its key (a member fenced by the group that handled
// it after the next owner began).
func (r *run) verifyEpochs(alive ...*member) (dups, stale int) {
	for _, m := range alive {
		r.stopGracefully(m)
	}
	r.readers.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortLines()
	seen := map[string][]int{}
	epoch := map[string]uint64{}
	for _, h := range r.lines {
		if h.epoch < epoch[h.id] {
			stale++
			continue
		}
		epoch[h.id] = h.epoch
		seen[h.id] = append(seen[h.id], h.seq)
	}
	return checkOrder(r.t, seen, r.keys, r.perKey), stale
}

// sortLines sorts the lines by the handlers' start times (r.mu).
func (r *run) sortLines() {
	slices.SortStableFunc(r.lines, func(a, b handled) int {
		switch {
		case a.start != b.start:
			return cmpInt(a.start, b.start)
		case a.proc != b.proc:
			return a.proc - b.proc
		}
		return a.line - b.line
	})
}

// noneTwiceBefore requires that nothing started before the kill was a
// duplicate: every replay comes after it.
func (r *run) noneTwiceBefore(kill int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := map[string]int{}
	for _, h := range r.lines { // sorted by verify
		if h.start >= kill {
			continue
		}
		require.Greater(r.t, h.seq, last[h.id], "%s: %d handled again before the kill", h.id, h.seq)
		last[h.id] = h.seq
	}
}

func cmpInt(a, b int64) int {
	if a < b {
		return -1
	}
	return 1
}

// uncommitted returns how many records member proc handled above the
// group's committed offsets, by partition: work a kill of proc leaves to
// be replayed.
func (r *run) uncommitted(proc int) int64 {
	r.t.Helper()
	committed, err := r.cluster.Committed(ctxTimeout(r.t, 10*time.Second), r.group, mpTopic)
	require.NoError(r.t, err)
	var above int64
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.lines {
		if h.proc == proc && h.offset >= committed[h.partition] {
			above++
		}
	}
	return above
}

// Two members; one is killed with SIGKILL mid-run, once it handled records
// above the group's commits, and started again. Every exchange is handled,
// each key in order; what the killed member had handled above its last
// commit is replayed in order or skipped (the commit's finished map), and
// there is some: the kill caught uncommitted work (the committed offsets,
// read after it, are below what it had handled), so the test cannot pass
// without a replay or a skip.
func TestMultiProcessKillAndRestart(t *testing.T) {
	r := newRun(t)
	begin := time.Now()
	for b := range 3 {
		r.produce(b)
	}
	a, b := r.start(), r.start()
	r.await("a to handle records above the commits, with 10,000 handled", 30*time.Second, func() bool {
		r.mu.Lock()
		n := len(r.distinct)
		r.mu.Unlock()
		return n >= 10_000 && r.uncommitted(0) > 0
	})
	killed := time.Now().UnixNano()
	r.kill(a)
	above := r.uncommitted(0) // a's last commits are in: it is dead
	a2 := r.start()
	for batch := 3; batch < mpBatches; batch++ {
		r.produce(batch)
	}
	r.waitFor(mpKeys*mpPerKey, 60*time.Second)
	dups := r.verify(b, a2)
	r.noneTwiceBefore(killed)
	skipped := r.stats(b).Skipped + r.stats(a2).Skipped
	t.Logf("%d exchanges, 8 partitions, 2 members, one killed and restarted with %d records handled above the commits: %d duplicates (in-order replays), %d skipped, %v",
		mpKeys*mpPerKey, above, dups, skipped, time.Since(begin).Round(time.Millisecond))
	require.Positive(t, above, "the kill caught records handled and not committed")
	require.GreaterOrEqual(t, int64(dups)+skipped, above, "every record handled above the commits was replayed or skipped")
}

// One member; a second joins mid-run (a rebalance moves partitions to it),
// then the first stops gracefully (its partitions are handed off): every
// exchange is handled exactly once, each key in order.
func TestMultiProcessJoinAndGracefulHandoff(t *testing.T) {
	r := newRun(t)
	begin := time.Now()
	for b := range 3 {
		r.produce(b)
	}
	a := r.start()
	r.waitFor(20_000, 30*time.Second)
	b := r.start()
	for batch := 3; batch < 6; batch++ {
		r.produce(batch)
	}
	r.waitFor(50_000, 30*time.Second)
	r.stopGracefully(a)
	for batch := 6; batch < mpBatches; batch++ {
		r.produce(batch)
	}
	r.waitFor(mpKeys*mpPerKey, 60*time.Second)
	dups := r.verify(b)
	require.Zero(t, dups, "duplicates after a join and a graceful handoff")
	revoked := r.revocations()
	require.NotEmpty(t, revoked, "the join and the stop revoked partitions")
	t.Logf("%d exchanges, 8 partitions, a member joining, then the first leaving gracefully: 0 duplicates, %v; revocations (drain and commit) took %v",
		mpKeys*mpPerKey, time.Since(begin).Round(time.Millisecond), revoked)
}

// count returns how many lines handled by member proc satisfy ok.
func (r *run) count(proc int, ok func(handled) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.lines {
		if h.proc == proc && ok(h) {
			n++
		}
	}
	return n
}

// await waits until cond holds, failing with the members' stderr at the
// timeout.
func (r *run) await(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-r.progress:
		case <-deadline.C:
			require.FailNow(r.t, "timed out waiting for "+what, "members' stderr: %s", r.stderr())
		}
	}
}

// stats returns the Stats member m wrote when it stopped.
func (r *run) stats(m *member) kafka.Stats {
	r.t.Helper()
	for _, line := range strings.Split(m.stderr.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "stats "); ok {
			var s kafka.Stats
			require.NoError(r.t, json.Unmarshal([]byte(rest), &s))
			return s
		}
	}
	require.FailNow(r.t, "the member wrote no stats", "stderr: %s", m.stderr.String())
	return kafka.Stats{}
}

// failoverSession is the session timeout of TestMultiProcessKillFailover's
// members, with a heartbeat of a tenth of it (runChild): the smallest a
// broker allows by default (group.min.session.timeout.ms, kfake's too).
const failoverSession = 6 * time.Second

// Two members with 6 s sessions and 600 ms heartbeats; one is killed with
// SIGKILL while it holds records above its commits. The group assigns its
// partitions to the survivor after the session timeout plus the rebalance
// (under 2 sessions: franz-go's default 45 s session fails it), and the
// survivor begins them within a session of that assignment (its offset
// fetch, the poll's barrier and a fetch: a few round trips, which a loaded
// 2-core machine under -race stretches to seconds); nothing is lost or
// reordered.
func TestMultiProcessKillFailover(t *testing.T) {
	r := newRun(t)
	next := 3 // the batches produced so far; the rest follow as the members catch up
	for b := range next {
		r.produce(b)
	}
	env := sessionEnv + "=" + failoverSession.String()
	a, b := r.start(env), r.start(env)
	r.await("both members to handle records, a above its commits, with 20,000 handled", 60*time.Second, func() bool {
		r.mu.Lock()
		procs := map[int]bool{}
		for _, h := range r.lines {
			procs[h.proc] = true
		}
		n := len(r.distinct)
		r.mu.Unlock()
		// Awaited, not asserted once: a member that has caught up has
		// committed all it handled, so records keep coming until a holds
		// some above its commits. (uncommitted takes the lock.)
		if n >= 20_000 && len(procs) == 2 && r.uncommitted(0) > 0 {
			return true
		}
		if next < mpBatches && n >= next*mpKeys*(mpPerKey/mpBatches)-5_000 {
			r.produce(next)
			next++
		}
		return false
	})
	killed := time.Now().UnixNano()
	r.kill(a)
	// a's last commits are in: it is dead.
	require.Positive(t, r.uncommitted(0), "a held records above its commits at the kill")
	// a's partitions: those whose last record before the kill a handled.
	r.mu.Lock()
	lastBy := map[int32]int{}
	for _, h := range r.lines {
		if h.start < killed {
			lastBy[h.partition] = h.proc
		}
	}
	r.mu.Unlock()
	var orphans []int32
	for p, proc := range lastBy {
		if proc == 0 {
			orphans = append(orphans, p)
		}
	}
	require.NotEmpty(t, orphans, "a owned partitions at the kill")
	for ; next < mpBatches; next++ {
		r.produce(next)
	}
	r.waitFor(mpKeys*mpPerKey, 3*failoverSession+30*time.Second)
	dups := r.verify(b)
	r.mu.Lock()
	last := int64(0) // when b began the last of a's partitions
	for _, p := range orphans {
		first := int64(0)
		for _, h := range r.lines {
			if h.partition == p && h.proc == 1 && h.start >= killed && (first == 0 || h.start < first) {
				first = h.start
			}
		}
		require.NotZero(t, first, "partition %d handled by b after the kill", p)
		last = max(last, first)
	}
	r.mu.Unlock()
	// The assignment that gave them to b: its last before it began them.
	assigned := int64(0)
	for _, at := range r.syncs(1) {
		if at > killed && at <= last {
			assigned = at
		}
	}
	require.NotZero(t, assigned, "b assigned after the kill, before it began a's partitions")
	failover, begin := time.Duration(assigned-killed), time.Duration(last-assigned)
	outage := failover + begin
	t.Logf("session %v: a killed owning partitions %v; the group assigned them to b %v after the kill, b handled the last of them %v later (%v in all); %d duplicates (in-order replays)",
		failoverSession, orphans, failover.Round(time.Millisecond), begin.Round(time.Millisecond), outage.Round(time.Millisecond), dups)
	require.Less(t, failover, 2*failoverSession, "the group's failover of a's partitions")
	require.GreaterOrEqual(t, failover, failoverSession*4/5, "the group waited for the session (a left without a word)")
	require.Less(t, begin, failoverSession, "b's start of the partitions assigned")
}
