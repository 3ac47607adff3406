package kafka_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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

// A member stuck on an early record (a poison retried in place) finishes
// the rest of its partition above it, which it cannot commit; killed by
// SIGKILL, the next member replays the stuck record and what had not
// finished, and skips the finished records the commit's metadata records:
// the duplicates are at most what was running at the kill plus one fetch
// batch, where without the map they are the whole partition above the
// stuck record. The checker sees every record handled, each key in order.
func TestMultiProcessKillWithAStuckRecordReplaysOnlyTheUnfinished(t *testing.T) {
	r := newRun(t)
	begin := time.Now()
	for b := range mpBatches {
		r.produce(b)
	}
	// A session of 4 s: a lease lapsed on a loaded machine would replay
	// from the commit before the kill (its own test: lease_test.go).
	session := sessionEnv + "=4s"
	a := r.start(poisonEnv+"=acct-7 3", session)
	var pp int32
	var pos int64
	deadline := time.Now().Add(60 * time.Second)
	for pos == 0 {
		if m := retryLine.FindStringSubmatch(a.stderr.String()); m != nil {
			p, _ := strconv.Atoi(m[1])
			pp, pos = int32(p), int64(must(strconv.Atoi(m[2])))
			break
		}
		require.True(t, time.Now().Before(deadline), "no retry line; stderr: %s", r.stderr())
		time.Sleep(10 * time.Millisecond) // polling another process's output
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cluster.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, mpTopic)
	require.NoError(t, err)
	var committed map[int32]int64
	require.Eventually(t, func() bool {
		committed, err = r.cluster.Committed(ctx, r.group, mpTopic)
		if err != nil {
			return false
		}
		for p := range int32(mpPartitions) {
			end, _ := ends.Lookup(mpTopic, p)
			if p != pp && committed[p] != end.Offset {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "every partition but the stuck one committed to its end")
	require.LessOrEqual(t, committed[pp], pos, "not committed past the stuck record")
	// What a finished above the stuck record's commit: the replay a kill
	// costs without the map.
	above := r.uncommitted(0)
	require.Greater(t, above, int64(1000), "the kill hits a backlog finished above the stuck record")
	killed := time.Now().UnixNano()
	r.kill(a)
	a2 := r.start(session)
	r.waitFor(mpKeys*mpPerKey, 60*time.Second)
	dups := r.verify(a2)
	r.noneTwiceBefore(killed)
	skipped := r.stats(a2).Skipped
	const running, fetchBatch = 16, 1000 // the child's goroutines, WithMaxPollRecords' default
	t.Logf("%d records, stuck at partition %d offset %d (committed %d at the kill), %d finished above the commits; after SIGKILL %d duplicates (in-order replays), %d skipped, %v",
		mpKeys*mpPerKey, pp, pos, committed[pp], above, dups, skipped, time.Since(begin).Round(time.Millisecond))
	require.LessOrEqual(t, dups, running+fetchBatch, "replayed only what had not finished")
	require.GreaterOrEqual(t, skipped+int64(dups), above, "what had finished above the commit was skipped or replayed")
}
