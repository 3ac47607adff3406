package jetstream_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
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

// poisoned is a handler whose exchange key-1 #2 (stream sequence 5 of
// publish(3, 3) on one partition) fails its first fails calls (every call
// when fails is 0); it records the order of the calls.
type poisoned struct {
	fails int
	mu    sync.Mutex
	calls []string // "key-1#2@1": key, sequence, attempt
	n     int
}

func (h *poisoned) handle(_ context.Context, d partition.Delivery[keyed]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, d.Exchange.Key+"#"+strconv.FormatUint(d.Exchange.Seq, 10)+"@"+strconv.Itoa(d.Attempt))
	if d.Exchange.Key == "key-1" && d.Exchange.Seq == 2 {
		if h.n++; h.fails == 0 || h.n <= h.fails {
			return errPoison
		}
	}
	return nil
}

// of returns the calls of key, in order.
func (h *poisoned) of(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.calls {
		if len(c) > len(key) && c[:len(key)+1] == key+"#" {
			out = append(out, c)
		}
	}
	return out
}

// floor returns partition 0's ack floor, 0 on an error (for Eventually).
func (e *env) floor(durable string) uint64 { return e.floorOf(durable, 0) }

// floorOf returns partition p's ack floor, 0 on an error (the durable
// consumer not made yet, for one).
func (e *env) floorOf(durable string, p int32) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.topo.Stream, durable+"-"+strconv.Itoa(int(p)))
	if err != nil {
		return 0
	}
	return c.CachedInfo().AckFloor.Stream
}

// The failure policies on a real server, one partition of nine messages
// whose fifth (key-1 #2) fails: what is acknowledged, what the dead-letter
// stream holds, what the log shows at the default level (Info), and Stats.
func TestFailurePolicyMatrix(t *testing.T) {
	fast := partition.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	for _, c := range []struct {
		name   string
		policy partition.FailurePolicy
		fails  int // of the poison before it succeeds; 0: always
		floor  uint64
		stats  partition.FailureStats
		last   string // the message of the last failure line
	}{
		{"settle", partition.FailurePolicy{}, 0, 9, partition.FailureStats{Settled: 1},
			"partition: handler failed, settled"},
		{"retry", partition.FailurePolicy{Retries: 5, Backoff: fast}, 2, 9, partition.FailureStats{Retries: 2},
			"partition: handler failed, retrying"},
		{"retry-then-settle", partition.FailurePolicy{Retries: 2, Backoff: fast}, 0, 9,
			partition.FailureStats{Retries: 2, Settled: 1}, "partition: handler failed, settled"},
		{"dead-letter", partition.FailurePolicy{Retries: 1, Backoff: fast, Then: partition.DeadLetter("dlq.ex")}, 0, 9,
			partition.FailureStats{Retries: 1, DeadLettered: 1}, "partition: handler failed, dead-lettered"},
		{"stop", partition.FailurePolicy{Then: partition.Stop()}, 0, 4, partition.FailureStats{Stopped: 1},
			"partition: handler failed, stopping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 1)
			_, err := e.js.CreateStream(ctx(t), natsjs.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}, Storage: natsjs.MemoryStorage})
			require.NoError(t, err)
			e.publish(t, 3, 3)
			logs := &testkit.LogCapture{Level: slog.LevelInfo}
			h := &poisoned{fails: c.fails}
			cons, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, h.handle,
				jetstream.WithLogger(slog.New(logs)), jetstream.WithFailurePolicy(c.policy))
			require.NoError(t, err)
			require.NoError(t, cons.Prepare(ctx(t)))
			require.NoError(t, cons.Start())
			if c.policy.Then == partition.Stop() {
				select {
				case <-cons.Done():
				case <-ctx(t).Done():
					t.Fatal("the consumer did not stop")
				}
				require.ErrorIs(t, cons.Err(), partition.ErrHandlerFailed)
				require.ErrorIs(t, cons.Err(), errPoison)
			} else {
				require.Eventually(t, func() bool { return e.floor("c") == 9 }, 10*time.Second, 5*time.Millisecond)
				require.NoError(t, cons.StopGracefully(ctx(t)))
			}
			require.Equal(t, c.floor, e.floor("c"), "acknowledged")
			st := cons.Stats()
			require.Equal(t, c.stats, st.Failures)

			key1 := h.of("key-1")
			attempts := 1 + int(c.stats.Retries)
			require.GreaterOrEqual(t, len(key1), 1+attempts, "key-1 #1 and the poison's attempts: %v", key1)
			for i := range attempts {
				require.Equal(t, "key-1#2@"+strconv.Itoa(i+1), key1[1+i], "attempts in place: %v", key1)
			}
			if c.floor == 9 {
				require.Equal(t, []string{"key-1#3@1"}, key1[1+attempts:], "key-1 #3 after the poison's last attempt")
			}

			lines := failureLines(logs)
			require.NotEmpty(t, lines, "the failure shows at the default level")
			end := lines[len(lines)-1]
			require.Equal(t, c.last, end.Message)
			require.Equal(t, int64(0), end.Attrs["partition"])
			require.Equal(t, int64(5), end.Attrs["position"])
			require.Equal(t, "key-1", end.Attrs["aggregate_id"])
			require.ErrorIs(t, end.Attrs["error"].(error), errPoison)

			dlq, err := e.js.Stream(ctx(t), "DLQ")
			require.NoError(t, err)
			info, err := dlq.Info(ctx(t))
			require.NoError(t, err)
			if c.stats.DeadLettered == 0 {
				require.Zero(t, info.State.Msgs, "no dead letter")
			} else {
				require.Equal(t, uint64(1), info.State.Msgs)
				m, err := dlq.GetMsg(ctx(t), 1)
				require.NoError(t, err)
				require.Equal(t, "dlq.ex", m.Subject)
				require.Equal(t, encodeSeq(2), m.Data, "the original payload")
				require.Equal(t, "key-1", m.Header.Get(jetstream.KeyHeader))
				require.Equal(t, "EX", m.Header.Get(jetstream.DeadLetterStreamHeader))
				require.Equal(t, "ex.0", m.Header.Get(jetstream.DeadLetterSubjectHeader))
				require.Equal(t, "5", m.Header.Get(jetstream.DeadLetterSequenceHeader))
				require.Equal(t, "poison", m.Header.Get(jetstream.DeadLetterErrorHeader))
				require.Equal(t, "2", m.Header.Get(jetstream.DeadLetterAttemptsHeader))
			}
			t.Logf("%s: ack floor %d of 9, dead letters %d, Failures %+v, %d failure lines, last %q %v",
				c.name, e.floor("c"), info.State.Msgs, st.Failures, len(lines), end.Message, end.Attrs)
		})
	}
}

// A dead letter that cannot be published (no stream captures its subject)
// is tried again, and the message is not acknowledged meanwhile: a stop
// leaves it to the next owner.
func TestFailureDeadLetterUnpublishedIsNotAcknowledged(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 3, 3)
	logs := &testkit.LogCapture{Level: slog.LevelInfo}
	h := &poisoned{}
	cons, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, h.handle,
		jetstream.WithLogger(slog.New(logs)), jetstream.WithFailurePolicy(partition.FailurePolicy{
			Then: partition.DeadLetter("nowhere"), Backoff: partition.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}}))
	require.NoError(t, err)
	require.NoError(t, cons.Prepare(ctx(t)))
	require.NoError(t, cons.Start())
	require.Eventually(t, func() bool { return cons.Stats().Failures.DeadLetterErrors >= 3 && e.floor("c") == 4 },
		10*time.Second, 5*time.Millisecond)
	stop, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, cons.StopGracefully(stop), context.DeadlineExceeded, "the drain waits for the dead letter")
	cons.ForceStop()
	<-cons.Done()
	require.Equal(t, uint64(4), e.floor("c"), "the poison and what follows it are not acknowledged")
	require.Zero(t, cons.Stats().Failures.DeadLettered)
	lines := failureLines(logs)
	require.NotEmpty(t, lines)
	require.Equal(t, "partition: dead letter not published, trying again", lines[0].Message)
}

// NewConsumer refuses a dead-letter subject that is a wildcard or one of
// the partitions, and an invalid policy, naming the field.
func TestFailurePolicyRefused(t *testing.T) {
	e := newEnv(t, 2)
	for _, c := range []struct {
		p    partition.FailurePolicy
		want string
	}{
		{partition.FailurePolicy{Then: partition.DeadLetter("dlq.*")}, `dead-letter subject "dlq.*"`},
		{partition.FailurePolicy{Then: partition.DeadLetter("ex.1")}, `dead-letter subject "ex.1"`},
		{partition.FailurePolicy{Retries: -2}, "FailurePolicy.Retries -2 is negative"},
	} {
		_, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, noop,
			jetstream.WithFailurePolicy(c.p))
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument)
		require.ErrorContains(t, err, c.want)
	}
}

// A log handler that panics on the consumer's failure line costs the line,
// never the stop: under Stop the poisoned message still fails the consumer,
// which acknowledges what came before it in its partition.
func TestFailureStopLogHandlerPanics(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 3, 3)
	logs := &testkit.LogPanic{Prefix: "jetstream: consumer failed"}
	h := &poisoned{}
	cons, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, h.handle,
		jetstream.WithLogger(slog.New(logs)), jetstream.WithFailurePolicy(partition.FailurePolicy{Then: partition.Stop()}))
	require.NoError(t, err)
	require.NoError(t, cons.Prepare(ctx(t)))
	require.NoError(t, cons.Start())
	select {
	case <-cons.Done():
	case <-time.After(15 * time.Second):
		cons.ForceStop()
		<-cons.Done()
		t.Fatalf("the consumer did not stop: Failures %+v, ack floor %d", cons.Stats().Failures, e.floor("c"))
	}
	require.ErrorIs(t, cons.Err(), partition.ErrHandlerFailed)
	require.ErrorIs(t, cons.Err(), errPoison)
	require.Equal(t, uint64(4), e.floor("c"), "acknowledged up to the poison")
	require.Equal(t, partition.FailureStats{Stopped: 1}, cons.Stats().Failures)
}
