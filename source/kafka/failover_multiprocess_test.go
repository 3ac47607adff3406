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
// SIGKILL while it holds records above its commits. Every partition it
// owned is handled by the survivor within the session timeout plus the
// rebalance (under 2 sessions: franz-go's default 45 s session fails it),
// and nothing is lost or reordered.
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
	outage := time.Duration(0)
	for _, p := range orphans {
		first := int64(0)
		for _, h := range r.lines {
			if h.partition == p && h.proc == 1 && h.start >= killed && (first == 0 || h.start < first) {
				first = h.start
			}
		}
		require.NotZero(t, first, "partition %d handled by b after the kill", p)
		outage = max(outage, time.Duration(first-killed))
	}
	r.mu.Unlock()
	t.Logf("session %v: a killed owning partitions %v; b handled the last of them %v after the kill; %d duplicates (in-order replays)",
		failoverSession, orphans, outage.Round(time.Millisecond), dups)
	require.Less(t, outage, 2*failoverSession, "outage of a's partitions")
	require.GreaterOrEqual(t, outage, failoverSession*4/5, "the group waited for the session (a left without a word)")
}
