package kafka_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
	for b := range mpBatches {
		r.produce(b)
	}
	env := sessionEnv + "=" + failoverSession.String()
	a, b := r.start(env), r.start(env)
	r.await("both members to handle records, a above its commits, with 20,000 handled", 60*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		procs := map[int]bool{}
		for _, h := range r.lines {
			procs[h.proc] = true
		}
		return len(r.distinct) >= 20_000 && len(procs) == 2
	})
	require.Positive(t, r.uncommitted(0), "a holds records above its commits")
	killed := time.Now().UnixNano()
	r.kill(a)
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
