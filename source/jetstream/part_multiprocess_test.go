package jetstream_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The pause tests: a consumer process is paused (SIGSTOP) pauses times for
// pauseFor, longer than its pulls' server-side expiry pauseExpiry, and
// continued (SIGCONT) for pauseRun; during each pause one exchange is
// published, which the server delivers to the paused process when its pull
// is still waiting: it arrives while the pull expires.
const (
	pauses      = 40
	pauseFor    = 700 * time.Millisecond
	pauseRun    = 200 * time.Millisecond
	pauseExpiry = 300 * time.Millisecond
	pauseKeys   = 8
)

const allOwned = "0,1,2,3,4,5,6,7"

// delivered returns how many deliveries the server made on partition p's
// durable consumer (its consumer sequence).
func (e *env) delivered(t testing.TB, p int32) uint64 {
	t.Helper()
	info, err := e.js.Consumer(ctx(t), e.topo.Stream, childDurable+"-"+itoa(int(p)))
	require.NoError(t, err)
	return info.CachedInfo().Delivered.Consumer
}

// waiting reports whether every partition has a pull waiting on the server.
func (e *env) waiting(t testing.TB) bool {
	for p := range mpPartitions {
		info, err := e.js.Consumer(ctx(t), e.topo.Stream, childDurable+"-"+itoa(p))
		if err != nil || info.CachedInfo().NumWaiting == 0 {
			return false
		}
	}
	return true
}

// drainedKeys reports whether the partitions of the first keys aggregates
// are acknowledged to their last sequence.
func (e *env) drainedKeys(t testing.TB, keys int) bool {
	for k := range keys {
		p := e.topo.PartitionOf(keyName(k))
		if e.ackFloor(t, childDurable, p) != e.lastSeq(t, p) {
			return false
		}
	}
	return true
}

// pauseAcrossExpiries runs the pauses against a consumer process, static
// or the only member of a dynamic assignment; racing gives its pulls a
// client deadline (WithRacingPulls), so that some exchanges delivered are
// dropped and only the resets keep them from being lost.
func pauseAcrossExpiries(t *testing.T, dynamic, racing bool) {
	e := newEnv(t, mpPartitions)
	out := filepath.Join(t.TempDir(), "records")
	deadline := time.Now().Add(mpDeadline)
	extra := []string{envPullExpiry + "=" + pauseExpiry.String()}
	if racing {
		extra = append(extra, envRacing+"=1")
	}
	var c *proc
	if dynamic {
		c = startChild(t, e, "", out, false, append(extra, envMember+"=a", envTTL+"=10s")...)
		waitFor(t, deadline, "a to own every partition", func() bool { return e.ownsAll(t, "a") }, c)
	} else {
		c = startChild(t, e, allOwned, out, false, extra...)
	}
	t.Cleanup(func() { // the child's resets, claims and stop, when a check failed
		if t.Failed() {
			t.Logf("child:\n%s", c.stderr())
		}
	})
	waitFor(t, deadline, "a pull waiting on every partition", func() bool { return e.waiting(t) }, c)
	hits := 0
	for i := range pauses {
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
		paused := time.Now()
		p := e.topo.PartitionOf(keyName(i % pauseKeys))
		before := e.delivered(t, p)
		pubCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, e.publishFrom(pubCtx, pauseKeys, i, 1))
		cancel()
		for time.Since(paused) < pauseFor-50*time.Millisecond {
			if e.delivered(t, p) > before {
				hits++ // delivered to the paused process
				break
			}
			<-time.After(5 * time.Millisecond) // polling the server's progress
		}
		hold(paused, pauseFor)
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
		hold(time.Now(), pauseRun)
	}
	// A partition that acknowledged past a lost exchange may never get to its
	// end: the records tell what was lost, so the wait is bounded on its own.
	drainBy := time.Now().Add(30 * time.Second)
	drained := e.drainedKeys(t, pauseKeys)
	for ; !drained && time.Now().Before(drainBy); drained = e.drainedKeys(t, pauseKeys) {
		<-time.After(10 * time.Millisecond) // polling the server's progress
	}
	c.stop(t, syscall.SIGTERM)
	var run []handled
	fields := 3
	if dynamic {
		fields = 5
	}
	readLines(t, out, fields, func(h handled, _ [][]byte) { run = append(run, h) })
	r := checkReplays([][]handled{run}, allKeys()[:pauseKeys], pauses/pauseKeys)
	stats := c.stderr()
	if i := strings.LastIndex(stats, "stats: "); i >= 0 {
		stats = stats[i:]
	}
	t.Logf("%d pauses, %d with an exchange delivered to the paused process; %+v; %s", pauses, hits, r, stats)
	require.Zero(t, r.lost, "every exchange handled")
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.GreaterOrEqual(t, hits, pauses/4, "the pauses must catch deliveries in flight")
	require.True(t, drained, "every partition acknowledged to its end")
	if racing {
		require.Regexp(t, `Resets:[1-9]`, stats, "dropped deliveries, repaired by resets")
	}
}

func TestPauseAcrossPullExpiryLosesNothingStatic(t *testing.T)  { pauseAcrossExpiries(t, false, false) }
func TestPauseAcrossPullExpiryLosesNothingDynamic(t *testing.T) { pauseAcrossExpiries(t, true, false) }

// With pulls that race a client deadline, as before they expired on the
// server only: the dropped deliveries are holes in the consumer sequence,
// each repaired by a reset.
func TestPauseWithRacingPullsIsRepairedByResets(t *testing.T) {
	t.Run("static", func(t *testing.T) { pauseAcrossExpiries(t, false, true) })
	t.Run("dynamic", func(t *testing.T) { pauseAcrossExpiries(t, true, true) })
}
