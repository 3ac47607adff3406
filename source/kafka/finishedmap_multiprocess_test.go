package kafka_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
	// from the commit before the kill (its own test: lapse_test.go).
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
