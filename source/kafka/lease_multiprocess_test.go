package kafka_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fence: members a and b share the partitions of a backlog, with
// sessions of 2 s; a is stopped (SIGSTOP) while it holds records, until b
// handled records of every partition (the group fenced a when its session
// expired and gave b its partitions), then continued. a must hand nothing
// more to its handlers under the leases it had at the stop: once woken it
// handles only under the leases of its next assignment, of a later epoch
// (the group's generation). The handlers running when a stopped began
// before; they finish after (16 at most, one per handler goroutine; not
// counted). Every key ends handled in order, nothing lost, and no record
// is handled under a lease whose epoch is below one that handled its key
// before (stale). 20,000 exchanges (400 aggregates of 50), handlers of
// 5 ms, 16 at once per member, so that a stops with hundreds of records
// still to handle.
func TestMultiProcessStalledMemberIsFenced(t *testing.T) {
	const keys, perKey = 400, 50
	r := newRun(t)
	r.keys, r.perKey = keys, perKey
	require.NoError(t, r.cluster.Produce(ctxTimeout(t, 30*time.Second), mpTopic, records(keys, perKey)...))
	// A budget of 500 records: a holds a backlog at the stop, and a drain
	// (when b joins and takes half the partitions) stays short of the
	// rebalance timeout.
	env := []string{sessionEnv + "=2s", delayEnv + "=5ms", pendingEnv + "=500"}
	a := r.start(env...)
	b := r.start(env...)
	r.await("a and b to handle some", 60*time.Second, func() bool {
		return r.count(0, func(handled) bool { return true }) >= 200 && r.count(1, func(handled) bool { return true }) >= 200
	})
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now().UnixNano()
	r.await("b to handle records of every partition after the stop", 60*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		ps := map[int32]bool{}
		for _, h := range r.lines {
			if h.proc == 1 && h.start > stopped {
				ps[h.partition] = true
			}
		}
		return len(ps) == mpPartitions
	})
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	continued := time.Now().UnixNano()
	r.waitFor(keys*perKey, 60*time.Second)
	dups, stale := r.verifyEpochs(a, b)
	sa := r.stats(a)
	var held uint64 // the highest epoch of a's leases at the stop
	r.mu.Lock()
	for _, h := range r.lines {
		if h.proc == 0 && h.start < stopped {
			held = max(held, h.epoch)
		}
	}
	r.mu.Unlock()
	zombie := r.count(0, func(h handled) bool { return h.start > continued && h.epoch <= held })
	after := r.count(0, func(h handled) bool { return h.start > continued })
	t.Logf("%d exchanges, a stopped past its session while holding a backlog: a began %d records under the leases it had at the stop after it was continued (and %d under its next ones), %d stale records (of an epoch below one that handled the key before); %d duplicates (in-order replays); a's stats %+v",
		keys*perKey, zombie, after-zombie, stale, dups, sa)
	require.Positive(t, sa.Lost+sa.Lapsed, "a lost the partitions b took over")
	require.Zero(t, stale, "records handled under a lease older than one that handled their key")
	require.Zero(t, zombie, "records a began under the leases it had at the stop after it was continued")
}
