package kafka_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A member a under a backlog with handlers of 20 ms and a budget of 8,000
// records; b joins. While the partitions revoked from a drain (the group
// shows two members and only a's kept partitions assigned), a goes on
// handling its kept ones; a is then stopped (SIGSTOP) in the middle of the
// drain until b handled records of every partition (the group fenced a
// and gave b everything), then continued. a begins no record under the
// leases it had at the stop, no record is handled under a lease older than
// one that handled its key before, every key is handled in order and
// nothing is lost.
func TestMultiProcessStalledDuringADrainIsFenced(t *testing.T) {
	const keys, perKey = 400, 50
	r := newRun(t)
	r.keys, r.perKey = keys, perKey
	require.NoError(t, r.cluster.Produce(ctxTimeout(t, 30*time.Second), mpTopic, records(keys, perKey)...))
	env := []string{sessionEnv + "=2s", delayEnv + "=20ms", pendingEnv + "=8000"}
	a := r.start(env...)
	r.await("a to handle some", 60*time.Second, func() bool { return r.count(0, func(handled) bool { return true }) >= 200 })
	b := r.start(env...)
	var kept map[int32]bool
	r.await("the group to assign a its kept partitions only, the others draining", 60*time.Second, func() bool {
		members, assigned := describe(t, r.cluster, r.group, mpTopic)
		kept = assigned
		return members == 2 && len(assigned) == mpPartitions/2
	})
	draining := time.Now().UnixNano()
	r.await("a to handle its kept partitions during the drain", 30*time.Second, func() bool {
		return r.count(0, func(h handled) bool { return h.start > draining && kept[h.partition] }) >= 100
	})
	require.NotContains(t, a.stderr.String(), "partitions revoked, drained and committed", "the drain is still running")
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
	during := r.count(0, func(h handled) bool { return h.start > draining && h.start < stopped })
	t.Logf("%d exchanges; a kept %d partitions and handled %d records during the drain before its stop; after it was continued it began %d records under the leases it had at the stop; %d stale records; %d duplicates (in-order replays); a's revocations: %d lines; a's stats %+v",
		keys*perKey, len(kept), during, zombie, stale, dups, strings.Count(a.stderr.String(), "partitions revoked, drained and committed"), sa)
	require.Positive(t, sa.Lost+sa.Lapsed, "a lost the partitions b took over")
	require.Zero(t, stale, "records handled under a lease older than one that handled their key")
	require.Zero(t, zombie, "records a began under the leases it had at the stop after it was continued")
}
