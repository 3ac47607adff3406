package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// withPoison makes a child's exchange poison ("key seq") fail on every
// call, under a policy that retries it in place for good, and logs at Info
// to the child's standard error.
func withPoison(poison string, record func(context.Context, partition.Delivery[keyed]) error,
	opts []jetstream.Option) (func(context.Context, partition.Delivery[keyed]) error, []jetstream.Option) {
	key, seq, _ := strings.Cut(poison, " ")
	n, _ := strconv.ParseUint(seq, 10, 64)
	h := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if d.Exchange.Key == key && d.Exchange.Seq == n {
			return fmt.Errorf("poison %s #%d", key, n)
		}
		return record(ctx, d)
	}
	return h, append(opts, jetstream.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		jetstream.WithFailurePolicy(partition.FailurePolicy{Retries: math.MaxInt32,
			Backoff: partition.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: 0.5}}))
}

// A process that retries a poison exchange in place, killed by SIGKILL
// while it waits: the server holds the poison and everything after it in
// its partition delivered and not acknowledged, the other partitions are
// acknowledged to their end; the next process (without the poison)
// handles the poison as a redelivery, then the rest, in order per
// aggregate, losing nothing.
func TestMultiProcessKillDuringARetryReplaysThePoisonInOrder(t *testing.T) {
	const keys, perKey = 200, 20
	e := newEnv(t, mpPartitions)
	dir := t.TempDir()
	deadline := time.Now().Add(mpDeadline)
	e.publish(t, keys, perKey)
	poisonKey, poisonSeq := keyName(7), 3
	pp := e.topo.PartitionOf(poisonKey)
	all := "0,1,2,3,4,5,6,7"
	a := startChild(t, e, all, filepath.Join(dir, "a"), false, envPoison+"="+poisonKey+" "+strconv.Itoa(poisonSeq))
	waitFor(t, deadline, "A to acknowledge every partition but the poison's, and to log its retries", func() bool {
		for p := range int32(mpPartitions) {
			if p != pp && e.floorOf(childDurable, p) != e.lastSeq(t, p) {
				return false
			}
		}
		return strings.Contains(a.stderr(), "partition: handler failed, retrying")
	}, a)
	pending := e.ackPending(t, strconv.Itoa(int(pp)))
	floor := e.ackFloor(t, childDurable, pp)
	require.Positive(t, pending, "the kill hits work delivered and not acknowledged")
	require.Less(t, floor, e.lastSeq(t, pp), "the poison's partition is held below it")
	a.stop(t, syscall.SIGKILL)
	handledByA := a.lines()
	logLine := ""
	for _, l := range strings.Split(a.stderr(), "\n") {
		if strings.Contains(l, "handler failed, retrying") {
			logLine = l
			break
		}
	}
	require.Contains(t, logLine, "level=WARN")
	require.Contains(t, logLine, fmt.Sprintf("partition=%d", pp))
	require.Contains(t, logLine, "aggregate_id="+poisonKey)
	require.Contains(t, logLine, fmt.Sprintf(`error="poison %s #%d"`, poisonKey, poisonSeq))

	b := startChild(t, e, all, filepath.Join(dir, "b"), false)
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
	for _, h := range runA {
		require.False(t, h.key == poisonKey && h.seq >= uint64(poisonSeq), "A handled %s #%d past the poison", h.key, h.seq)
	}
	var again *handled
	for i, h := range runB {
		if h.key == poisonKey && h.seq == uint64(poisonSeq) {
			again = &runB[i]
			break
		}
	}
	require.NotNil(t, again, "B handled the poison")
	require.GreaterOrEqual(t, again.attempt, 2, "as a redelivery")
	t.Logf("A handled %d of %d, held %d delivered and not acknowledged on partition %d (ack floor %d) at the kill; B: %+v",
		handledByA, keys*perKey, pending, pp, floor, r)
}
