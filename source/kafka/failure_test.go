package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
	"github.com/aggflow/aggflow/testkit"
)

var errPoison = errors.New("poison")

// failureLines returns the records of the failure policy, in order.
func failureLines(logs *testkit.LogCapture) []testkit.LogRecord {
	return logs.Records(func(r testkit.LogRecord) bool {
		_, ok := r.Attrs["aggregate_id"]
		return ok && r.Level >= slog.LevelWarn
	})
}

// poisoned is a handler whose exchange acct-1 #2 (offset 4 of records(3,
// 3) on one partition) fails its first fails calls (every call when fails
// is 0); it records the order of the calls.
type poisoned struct {
	fails int
	mu    sync.Mutex
	calls map[string][]string // per id: "2@1", sequence and attempt
	n     int
}

func (h *poisoned) handle(_ context.Context, d partition.Delivery[event]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string][]string{}
	}
	h.calls[d.Exchange.ID] = append(h.calls[d.Exchange.ID], strconv.Itoa(d.Exchange.Seq)+"@"+strconv.Itoa(d.Attempt))
	if d.Exchange.ID == "acct-1" && d.Exchange.Seq == 2 {
		if h.n++; h.fails == 0 || h.n <= h.fails {
			return errPoison
		}
	}
	return nil
}

func (h *poisoned) of(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls[id]...)
}

// committedAt returns the group's committed offset of partition 0, -1 if
// none or on an error (for Eventually).
func committedAt(c *kafkatest.Cluster, group, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := c.Committed(ctx, group, topic)
	if o, ok := got[0]; err == nil && ok {
		return o
	}
	return -1
}

// deadLettersOf reads every record of topic.
func deadLettersOf(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	end, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, end.Err)
	var out []*kgo.Record
	if end.Offset == 0 {
		return out
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer rd.Close()
	for int64(len(out)) < end.Offset {
		fs := rd.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(out), end.Offset)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// The failure policies on kfake, one partition of nine records whose fifth
// (acct-1 #2, offset 4) fails: what is committed, what the dead-letter
// topic holds, what the log shows at the default level (Info), and Stats.
func TestFailurePolicyMatrix(t *testing.T) {
	fast := partition.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		policy    partition.FailurePolicy
		fails     int
		committed int64
		stats     partition.FailureStats
		last      string
	}{
		{"settle", partition.FailurePolicy{}, 0, 9, partition.FailureStats{Settled: 1},
			"partition: handler failed, settled"},
		{"retry", partition.FailurePolicy{Retries: 5, Backoff: fast}, 2, 9, partition.FailureStats{Retries: 2},
			"partition: handler failed, retrying"},
		{"retry-then-settle", partition.FailurePolicy{Retries: 2, Backoff: fast}, 0, 9,
			partition.FailureStats{Retries: 2, Settled: 1}, "partition: handler failed, settled"},
		{"dead-letter", partition.FailurePolicy{Retries: 1, Backoff: fast, Then: partition.DeadLetter("orders-dlq")}, 0, 9,
			partition.FailureStats{Retries: 1, DeadLettered: 1}, "partition: handler failed, dead-lettered"},
		{"stop", partition.FailurePolicy{Then: partition.Stop()}, 0, 4, partition.FailureStats{Stopped: 1},
			"partition: handler failed, stopping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, "orders", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, c.CreateTopic(ctx, "orders-dlq", 1))
			require.NoError(t, c.Produce(ctx, "orders", records(3, 3)...))
			logs := &testkit.LogCapture{Level: slog.LevelInfo}
			h := &poisoned{fails: tc.fails}
			k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), h.handle,
				kafka.WithLogger(slog.New(logs)), kafka.WithFailurePolicy(tc.policy))
			startConsumer(t, k)
			if tc.policy.Then == partition.Stop() {
				select {
				case <-k.Done():
				case <-ctx.Done():
					t.Fatal("the consumer did not stop")
				}
				require.ErrorIs(t, k.Err(), partition.ErrHandlerFailed)
				require.ErrorIs(t, k.Err(), errPoison)
			} else {
				require.Eventually(t, func() bool { return committedAt(c, "g", "orders") == 9 }, 15*time.Second, 10*time.Millisecond)
				stop(t, k)
			}
			require.Equal(t, tc.committed, committedAt(c, "g", "orders"), "committed")
			st := k.Stats()
			require.Equal(t, tc.stats, st.Failures)

			attempts := 1 + int(tc.stats.Retries)
			acct1 := h.of("acct-1")
			require.GreaterOrEqual(t, len(acct1), 1+attempts, "%v", acct1)
			for i := range attempts {
				require.Equal(t, "2@"+strconv.Itoa(i+1), acct1[1+i], "attempts in place: %v", acct1)
			}
			if tc.committed == 9 {
				require.Equal(t, []string{"3@1"}, acct1[1+attempts:], "acct-1 #3 after the poison's last attempt")
			}

			lines := failureLines(logs)
			require.NotEmpty(t, lines, "the failure shows at the default level")
			end := lines[len(lines)-1]
			require.Equal(t, tc.last, end.Message)
			require.Equal(t, int64(0), end.Attrs["partition"])
			require.Equal(t, int64(4), end.Attrs["position"])
			require.Equal(t, "acct-1", end.Attrs["aggregate_id"])
			require.ErrorIs(t, end.Attrs["error"].(error), errPoison)

			dl := deadLettersOf(t, c, "orders-dlq")
			require.Len(t, dl, int(tc.stats.DeadLettered))
			if len(dl) == 1 {
				r := dl[0]
				require.Equal(t, "acct-1", string(r.Key))
				require.Equal(t, "2", string(r.Value), "the original value")
				require.Equal(t, "orders", header(r, kafka.DeadLetterTopicHeader))
				require.Equal(t, "0", header(r, kafka.DeadLetterPartitionHeader))
				require.Equal(t, "4", header(r, kafka.DeadLetterOffsetHeader))
				require.Equal(t, "poison", header(r, kafka.DeadLetterErrorHeader))
				require.Equal(t, "2", header(r, kafka.DeadLetterAttemptsHeader))
			}
			t.Logf("%s: committed %d of 9, dead letters %d, Failures %+v, %d failure lines, last %q %v",
				tc.name, committedAt(c, "g", "orders"), len(dl), st.Failures, len(lines), end.Message, end.Attrs)
		})
	}
}

// A dead letter that cannot be produced (its topic does not exist) is
// tried again, and the record is not committed past meanwhile: a stop
// leaves it to the next owner.
func TestFailureDeadLetterUnproducedIsNotCommitted(t *testing.T) {
	c := startCluster(t, "orders", 1, kafkatest.WithFakeOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Produce(ctx, "orders", records(3, 3)...))
	logs := &testkit.LogCapture{Level: slog.LevelInfo}
	h := &poisoned{}
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), h.handle,
		kafka.WithLogger(slog.New(logs)), kafka.WithCommitTimeout(200*time.Millisecond),
		kafka.WithRevokeTimeout(300*time.Millisecond),
		kafka.WithFailurePolicy(partition.FailurePolicy{Then: partition.DeadLetter("missing"),
			Backoff: partition.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}}))
	startConsumer(t, k)
	require.Eventually(t, func() bool {
		return k.Stats().Failures.DeadLetterErrors >= 2 && committedAt(c, "g", "orders") == 4
	}, 15*time.Second, 10*time.Millisecond)
	stop(t, k) // the drain gives up at the revoke timeout: the record is forced
	require.Equal(t, int64(4), committedAt(c, "g", "orders"), "the poison and what follows it are not committed")
	require.Zero(t, k.Stats().Failures.DeadLettered)
	lines := failureLines(logs)
	require.NotEmpty(t, lines)
	require.Equal(t, "partition: dead letter not published, trying again", lines[0].Message)
}

// NewConsumer refuses a dead-letter topic that is the subscription's or no
// topic name, and an invalid policy, naming the field.
func TestFailurePolicyRefused(t *testing.T) {
	for _, tc := range []struct {
		p    partition.FailurePolicy
		want string
	}{
		{partition.FailurePolicy{Then: partition.DeadLetter("orders")}, `dead-letter topic "orders"`},
		{partition.FailurePolicy{Then: partition.DeadLetter("a b")}, `dead-letter topic "a b"`},
		{partition.FailurePolicy{Backoff: partition.Backoff{Jitter: -1}}, "FailurePolicy.Backoff.Jitter"},
	} {
		_, err := kafka.NewConsumer("test", kafka.Subscription{Brokers: []string{"localhost:1"}, Group: "g", Topic: "orders"},
			accounts, newScheduler(t, 1), codec, func(context.Context, partition.Delivery[event]) error { return nil },
			kafka.WithFailurePolicy(tc.p))
		require.ErrorIs(t, err, kafka.ErrInvalidArgument)
		require.ErrorContains(t, err, tc.want)
	}
}

// An id function that panics on a record fails it before any handler: a
// policy that stops does not let it be committed past, nor settled; the
// consumer fails and commits what came before it.
func TestFailureStopIDPanics(t *testing.T) {
	c := startCluster(t, "orders", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Produce(ctx, "orders", records(3, 3)...))
	bad := codec
	bad.ID = func(e event) string {
		if e.ID == "acct-1" && e.Seq == 2 { // offset 4
			panic("no id")
		}
		return e.ID
	}
	k, err := kafka.NewConsumer("test", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "orders"},
		accounts, newScheduler(t, 4), bad, func(context.Context, partition.Delivery[event]) error { return nil },
		kafka.WithLogger(quiet), kafka.WithFailurePolicy(partition.FailurePolicy{Then: partition.Stop()}))
	require.NoError(t, err)
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-ctx.Done():
		k.ForceStop()
		<-k.Done()
		t.Fatalf("the consumer did not stop: committed %d, Failures %+v", committedAt(c, "g", "orders"), k.Stats().Failures)
	}
	require.ErrorIs(t, k.Err(), partition.ErrHandlerFailed)
	require.Equal(t, int64(4), committedAt(c, "g", "orders"), "committed up to the record")
	require.Equal(t, partition.FailureStats{Stopped: 1}, k.Stats().Failures)
}
