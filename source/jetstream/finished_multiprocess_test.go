package jetstream_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// A process stuck on an early exchange (a poison retried in place) with the
// rest of its partition's deliveries finished above it, killed by SIGKILL:
// the next process handles the stuck exchange and what had not finished,
// and skips what the finished map beside the ack floor records: the
// duplicates are at most what was running at the kill plus one fetch
// batch, where without the map they are every finished delivery above the
// ack floor. Nothing is lost, each aggregate in order.
func TestMultiProcessKillWithAStuckExchangeReplaysOnlyTheUnfinished(t *testing.T) {
	const keys, perKey = 200, 50
	e := newEnv(t, mpPartitions)
	dir := t.TempDir()
	deadline := time.Now().Add(mpDeadline)
	e.publish(t, keys, perKey)
	poisonKey, poisonSeq := keyName(7), 3
	pp := e.topo.PartitionOf(poisonKey)
	all := "0,1,2,3,4,5,6,7"
	a := startChild(t, e, all, filepath.Join(dir, "a"), false, envPoison+"="+poisonKey+" "+strconv.Itoa(poisonSeq), envFinished+"=1")
	var pending int
	waitFor(t, deadline, "A to acknowledge every partition but the stuck one's, with a backlog delivered above it", func() bool {
		for p := range int32(mpPartitions) {
			if p != pp && e.floorOf(childDurable, p) != e.lastSeq(t, p) {
				return false
			}
		}
		pending = e.ackPending(t, strconv.Itoa(int(pp)))
		return strings.Contains(a.stderr(), "partition: handler failed, retrying") && pending >= 500
	}, a)
	floor := e.ackFloor(t, childDurable, pp)
	require.Less(t, floor, e.lastSeq(t, pp), "the stuck partition is held below it")
	a.stop(t, syscall.SIGKILL)
	handledByA := a.lines()

	b := startChild(t, e, all, filepath.Join(dir, "b"), false, envFinished+"=1")
	waitFor(t, deadline, "B to acknowledge every partition to its end", func() bool { return e.drained(t) }, b)
	b.stop(t, syscall.SIGTERM)

	runA, runB := readRun(t, a.out), readRun(t, b.out)
	ks := make([]string, keys)
	for k := range ks {
		ks[k] = keyName(k)
	}
	r := checkRuns([][]handled{runA, runB}, ks, perKey)
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	const running = 2 // the child's goroutines
	t.Logf("A handled %d of %d, %d delivered and not acknowledged on partition %d (ack floor %d) at the kill; then %d duplicates (%+v)",
		handledByA, keys*perKey, pending, pp, floor, r.duplicates, r)
	require.LessOrEqual(t, r.duplicates, running+jetstream.DefaultFetchBatch, "replayed only what had not finished")
}
