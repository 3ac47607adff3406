package kafka_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// withPoison makes the record named by poisonEnv ("id seq"), if set, fail
// on every call.
func withPoison(handle func(context.Context, partition.Delivery[event]) error) func(context.Context, partition.Delivery[event]) error {
	id, seq, ok := strings.Cut(os.Getenv(poisonEnv), " ")
	if !ok {
		return handle
	}
	n, _ := strconv.Atoi(seq)
	return func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Exchange.ID == id && d.Exchange.Seq == n {
			return fmt.Errorf("poison %s #%d", id, n)
		}
		return handle(ctx, d)
	}
}

// poisonPolicy retries the poison in place for good, when poisonEnv is
// set (else nil, an option NewConsumer ignores).
func poisonPolicy() kafka.Option {
	if os.Getenv(poisonEnv) == "" {
		return nil
	}
	return kafka.WithFailurePolicy(partition.FailurePolicy{Retries: math.MaxInt32,
		Backoff: partition.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: 0.5}})
}

var retryLine = regexp.MustCompile(`level=WARN msg="partition: handler failed, retrying" .*partition=(\d+) position=(\d+) aggregate_id=acct-7 attempt=\d+ error="poison acct-7 #3"`)

// A member that retries a poison record in place, killed by SIGKILL while
// it waits: the group has committed every other partition to its end and
// the poison's partition at most up to the poison, with records above it
// handled and not committed; the next member (without the poison) handles
// the poison, then the rest, each key in order, losing nothing, the
// duplicates in-order replays after the kill.
func TestMultiProcessKillDuringARetryReplaysThePoisonInOrder(t *testing.T) {
	r := newRun(t)
	begin := time.Now()
	for b := range mpBatches {
		r.produce(b)
	}
	a := r.start(poisonEnv + "=acct-7 3")
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
	}, 60*time.Second, 20*time.Millisecond, "every partition but the poison's committed to its end")
	end, _ := ends.Lookup(mpTopic, pp)
	require.LessOrEqual(t, committed[pp], pos, "not committed past the poison")
	r.mu.Lock()
	handledByA := len(r.distinct)
	r.mu.Unlock()
	require.Less(t, handledByA, mpKeys*mpPerKey, "the kill hits unfinished work")
	killed := time.Now().UnixNano()
	r.kill(a)
	a2 := r.start()
	r.waitFor(mpKeys*mpPerKey, 60*time.Second)
	dups := r.verify(a2)
	r.noneTwiceBefore(killed)
	r.mu.Lock()
	for _, h := range r.lines {
		require.False(t, h.id == "acct-7" && h.seq == 3 && h.proc == 0, "the poison was not handled before the kill")
	}
	r.mu.Unlock()
	t.Logf("%d records, the poison at partition %d offset %d (end %d, committed %d at the kill); A handled %d distinct before SIGKILL; then %d duplicates (in-order replays), %v",
		mpKeys*mpPerKey, pp, pos, end.Offset, committed[pp], handledByA, dups, time.Since(begin).Round(time.Millisecond))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
