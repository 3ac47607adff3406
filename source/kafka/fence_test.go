package kafka_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/kafka"
)

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

// The fence: members a and b share the partitions of a backlog, with
// sessions of 2 s; a is stopped (SIGSTOP) while it holds records, for as
// long as b needs to take its partitions over (the group fences a when its
// session expires) and handle some of them; then a is continued. a must
// hand nothing more of the partitions it lost to its handlers: no record
// is handled under a lease whose epoch (the group's generation at the
// assignment) is below one that handled the record's key before. The
// handlers running when a stopped began before b took over; they finish
// after and are not stale (16 at most, one per handler goroutine; not
// counted). Every key ends handled in order, nothing lost.
// 20,000 exchanges (400 aggregates of 50), handlers of 5 ms, 16 at once
// per member, so that a stops with hundreds of records still to handle.
func TestMultiProcessStalledMemberIsFenced(t *testing.T) {
	const keys, perKey = 400, 50
	r := newRun(t)
	r.keys, r.perKey = keys, perKey
	require.NoError(t, r.cluster.Produce(ctxTimeout(t, 30*time.Second), mpTopic, records(keys, perKey)...))
	env := []string{sessionEnv + "=2s", delayEnv + "=5ms"}
	a := r.start(env...)
	b := r.start(env...)
	r.await("a and b to handle some", 60*time.Second, func() bool {
		return r.count(0, func(handled) bool { return true }) >= 200 && r.count(1, func(handled) bool { return true }) >= 200
	})
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now().UnixNano()
	held := map[int32]bool{} // the partitions a handled last: a's at the stop
	r.mu.Lock()
	r.sortLines()
	for _, h := range r.lines {
		held[h.partition] = h.proc == 0
	}
	r.mu.Unlock()
	r.await("b to take a's partitions over and handle some", 60*time.Second, func() bool {
		return r.count(1, func(h handled) bool { return held[h.partition] && h.start > stopped }) >= 50
	})
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	continued := time.Now().UnixNano()
	r.waitFor(keys*perKey, 60*time.Second)
	dups, stale := r.verifyEpochs(a, b)
	sa := r.stats(a)
	// The generation at which b took a's partitions over: a record a began
	// after it was continued under an older lease is a zombie's, whether b
	// had reached its key yet (stale) or not.
	takeover := uint64(1<<64 - 1)
	r.mu.Lock()
	for _, h := range r.lines {
		if h.proc == 1 && held[h.partition] && h.start > stopped {
			takeover = min(takeover, h.epoch)
		}
	}
	r.mu.Unlock()
	zombie := r.count(0, func(h handled) bool { return h.start > continued && h.epoch < takeover })
	owned := 0
	for _, mine := range held {
		if mine {
			owned++
		}
	}
	t.Logf("%d exchanges, a stopped past its session while holding %d partitions: a began %d records under its lost leases after it was continued, %d of them stale (b had handled their key); %d duplicates (in-order replays); a's stats %+v",
		keys*perKey, owned, zombie, stale, dups, sa)
	require.Positive(t, sa.Lost+sa.Lapsed, "a lost the partitions b took over")
	require.Zero(t, stale, "records a handled under the lease it lost after b handled their key")
	require.Zero(t, zombie, "records a began under the leases it lost after it was continued")
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
