package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
	"github.com/aggflow/aggflow/testkit"
)

// A log handler that ends the committing goroutine with runtime.Goexit (on
// the line of a panicking commit hook) fails the consumer, which stops on
// its own with the Goexit as its error, rather than going on without
// commits and without a word.
func TestALoggerGoexitOnTheCommittingGoroutineFailsTheConsumer(t *testing.T) {
	c := startCluster(t, "exit", 1)
	logs := &testkit.LogGoexit{Message: "kafka: commit hook panicked"}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), codec, newJournal(1).handle, kafka.WithLogger(slog.New(logs)),
		kafka.WithCommitHook(func(int32, int64) { panic("commit hook") }))
	require.NoError(t, err)
	startConsumer(t, k)
	require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(1))}))
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the consumer did not stop after the Goexit (the handler exited: %v)", logs.Exited())
	}
	require.True(t, logs.Exited(), "the log handler ended the committing goroutine")
	require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
	require.ErrorContains(t, k.Err(), "committing")
}

// A commit hook that ends its goroutine with runtime.Goexit (t.FailNow in a
// test's hook) must not cost the consumer its commits nor its end: the
// records handled after its first call are committed still, and a graceful
// stop, whose final commit calls the hook again, reaches Done.
func TestACommitHookGoexitKeepsCommittingAndStopping(t *testing.T) {
	c := startCluster(t, "exit", 1)
	called := make(chan int64, 100)
	j := newJournal(3)
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), codec, j.handle, kafka.WithLogger(quiet),
		kafka.WithCommitHook(func(_ int32, off int64) {
			called <- off
			runtime.Goexit()
		}))
	require.NoError(t, err)
	startConsumer(t, k)
	produce := func(seq int) {
		require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(seq))}))
	}
	produce(1)
	select {
	case off := <-called:
		require.Equal(t, int64(1), off)
	case <-time.After(20 * time.Second):
		t.Fatal("no commit of the first record")
	}
	produce(2)
	produce(3)
	j.wait(t, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, k.StopGracefully(ctx), "the stop reaches its end")
	committed, err := c.Committed(context.Background(), "g", "exit")
	require.NoError(t, err)
	require.Equal(t, int64(3), committed[0], "every handled record committed")
}

// holdFinalCommit makes the cluster hold the first commit of offset end
// until release is closed, then answer it (or, with refuse, answer every
// partition with RebalanceInProgress). requested closes when it arrives.
func holdFinalCommit(c *kafkatest.Cluster, end int64, refuse bool) (requested, release chan struct{}) {
	requested, release = make(chan struct{}), make(chan struct{})
	held := false // control functions run one at a time
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if held || !commits(r, end) {
			return nil, nil, false
		}
		held = true
		close(requested)
		c.Fake().SleepControl(func() { <-release })
		if !refuse {
			return nil, nil, false // answered as usual, after the stop began
		}
		return refusal(r, kerr.RebalanceInProgress.Code), nil, true
	})
	return requested, release
}

// refusal answers every partition of r with code.
func refusal(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func commits(r *kmsg.OffsetCommitRequest, offset int64) bool {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.Offset == offset {
				return true
			}
		}
	}
	return false
}

// A graceful stop begun while the commit of the last records is on its way
// to the broker: whether the broker then acknowledges that commit or
// refuses it, the stop commits the end of the partition before it leaves,
// and a consumer started after it handles nothing twice. (Marking offsets
// committed when the request leaves, not when the answer comes, lost the
// commit in the refused case.)
func TestGracefulStopRightAfterACommitRequest(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "acknowledged", true: "refused"}[refuse]
		t.Run(name, func(t *testing.T) {
			const keys, perKey = 50, 10
			const end = keys * perKey
			c := startCluster(t, "race", 1)
			ctx := context.Background()
			require.NoError(t, c.Produce(ctx, "race", records(keys, perKey)...))
			requested, release := holdFinalCommit(c, end, refuse)
			var releaseOnce sync.Once
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

			sched := newScheduler(t, 4)
			j := newJournal(end)
			k := newConsumer(t, c, "race", "race", sched, j.handle)
			startConsumer(t, k)
			j.wait(t, 20*time.Second)
			select {
			case <-requested:
			case <-time.After(20 * time.Second):
				require.FailNow(t, "the commit of the last records never came")
			}
			k.Quiesce()
			require.Equal(t, component.StateStopping, k.State())
			releaseOnce.Do(func() { close(release) })
			stop(t, k)
			require.Zero(t, j.check(t, keys, perKey))

			committed, err := c.Committed(ctx, "race", "race")
			require.NoError(t, err)
			require.Equal(t, map[int32]int64{0: end}, committed, "the end of the partition is committed")
			if refuse {
				require.Positive(t, k.Stats().CommitFailures, "the held commit was refused")
			}

			// The next consumer of the group reads only what came after.
			require.NoError(t, c.Produce(ctx, "race", &kgo.Record{Key: []byte("last"), Value: []byte("1")}))
			again := newJournal(1)
			k2 := newConsumer(t, c, "race", "race", sched, again.handle)
			startConsumer(t, k2)
			again.wait(t, 20*time.Second)
			stop(t, k2)
			again.mu.Lock()
			defer again.mu.Unlock()
			require.Equal(t, map[string][]int{"last": {1}}, again.seen, "nothing handled twice after the restart")
		})
	}
}

// A commit the group refuses as a zombie's (ILLEGAL_GENERATION: this
// member's generation is over) is counted in Stats.StaleCommits and logged
// at warning level, never taken as committed: the broker's next answer
// commits it.
func TestStaleCommitIsCountedAndNotTakenAsCommitted(t *testing.T) {
	const keys, perKey = 10, 3
	c := startCluster(t, "stale", 1)
	require.NoError(t, c.Produce(context.Background(), "stale", records(keys, perKey)...))
	refused := make(chan struct{})
	c.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.IllegalGeneration.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		close(refused)
		return resp, nil, true
	})
	var logs lockedBuffer
	j := newJournal(keys * perKey)
	k := newConsumer(t, c, "stale", "stale", newScheduler(t, 2), j.handle,
		kafka.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	select {
	case <-refused:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no commit was sent")
	}
	require.Eventually(t, func() bool {
		committed, err := c.Committed(context.Background(), "stale", "stale")
		return err == nil && committed[0] == keys*perKey
	}, 20*time.Second, 10*time.Millisecond, "the next commit is acknowledged")
	stop(t, k)
	s := k.Stats()
	require.Equal(t, int64(1), s.StaleCommits, "the refused partition offset")
	require.Positive(t, s.CommitFailures)
	require.Contains(t, logs.String(), "level=WARN msg=\"kafka: commit refused: this member's generation is over\"")
	require.Contains(t, logs.String(), "ILLEGAL_GENERATION")
}

// flaky is a store whose writes of some exchanges fail: a transient
// failure a few times, or for good.
type flaky struct {
	mu        sync.Mutex
	transient map[event]int // failures left
	permanent map[event]bool
	retrying  map[int64]bool // offsets between their first failure and their end
	seen      map[string][]int
	violation []string
	during    int // commits acknowledged while an offset was under retry
}

var errStore = errors.New("store unavailable")

func (f *flaky) write(_ context.Context, d partition.Delivery[event]) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := d.Exchange
	if f.permanent[e] || f.transient[e] > 0 {
		f.transient[e]--
		f.retrying[d.Position] = true
		return errStore
	}
	delete(f.retrying, d.Position)
	f.seen[e.ID] = append(f.seen[e.ID], e.Seq)
	return nil
}

func (f *flaky) ended(pos int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.retrying, pos)
}

// committed is the commit hook: no commit may pass an offset still retried.
func (f *flaky) committed(p int32, offset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.retrying) > 0 {
		f.during++
	}
	for pos := range f.retrying {
		if offset > pos {
			f.violation = append(f.violation, "commit "+strconv.FormatInt(offset, 10)+" passed offset "+strconv.FormatInt(pos, 10)+" under retry")
		}
	}
}

// deadLetters produces each exchange that failed for good to topic, with
// the error in a header.
func deadLetters(t *testing.T, c *kafkatest.Cluster, topic string) middleware.Middleware[partition.Delivery[event]] {
	dl, err := middleware.DeadLetter(func(ctx context.Context, d partition.Delivery[event], cause error) error {
		return c.Produce(ctx, topic, &kgo.Record{Key: []byte(d.Exchange.ID), Value: []byte(strconv.Itoa(d.Exchange.Seq)),
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte(cause.Error())}}})
	})
	require.NoError(t, err)
	return dl
}

// Inside its group a failed exchange is retried with backoff before the
// next exchange of its aggregate starts; one that keeps failing goes to the
// dead-letter topic and its aggregate goes on. Meanwhile the other
// aggregates of the partition run, but the partition's commits never pass
// the offset under retry: a crash then would deliver it again.
func TestRetryKeepsOrderAndTheCommitBelowTheRetriedRecord(t *testing.T) {
	const keys, perKey = 20, 10
	c := startCluster(t, "orders", 1)
	ctx := context.Background()
	require.NoError(t, c.CreateTopic(ctx, "orders.dead", 1))
	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))

	f := &flaky{
		transient: map[event]int{{"acct-3", 2}: 2, {"acct-7", 5}: 1},
		permanent: map[event]bool{{"acct-5", 4}: true},
		retrying:  map[int64]bool{}, seen: map[string][]int{},
	}
	retry, err := middleware.Retry[partition.Delivery[event]](
		middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }),
		middleware.WithMaxTries(3))
	require.NoError(t, err)
	j := newJournal(keys * perKey)
	h := middleware.Chain(func(ctx context.Context, d partition.Delivery[event]) error {
		err := f.write(ctx, d)
		if err == nil {
			j.add(d.Exchange)
		}
		return err
	}, deadLetters(t, c, "orders.dead"), retry)
	// The position ends once the dead letter is written, or the write
	// succeeded: the journal counts the dead letter too.
	handler := func(ctx context.Context, d partition.Delivery[event]) error {
		err := h(ctx, d)
		f.ended(d.Position)
		if f.permanent[d.Exchange] {
			j.add(d.Exchange)
		}
		return err
	}
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), handler, kafka.WithCommitHook(f.committed))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)

	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.violation)
	require.Positive(t, f.during, "commits went on while a record was retried")
	for id, seqs := range f.seen {
		want := make([]int, 0, perKey)
		for s := 1; s <= perKey; s++ {
			if !f.permanent[event{id, s}] {
				want = append(want, s)
			}
		}
		require.Equal(t, want, seqs, "%s handled in order, the retried ones in place", id)
	}
	committed, err := c.Committed(ctx, "g", "orders")
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: keys * perKey}, committed)

	dead := consumeAll(t, c, "orders.dead", 1)
	require.Equal(t, "acct-5", string(dead[0].Key))
	require.Equal(t, "4", string(dead[0].Value))
	require.Contains(t, string(dead[0].Headers[0].Value), "store unavailable")
}

// consumeAll reads n records of topic from the start, without a group.
func consumeAll(t *testing.T, c *kafkatest.Cluster, topic string, n int) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		out = append(out, fs.Records()...)
	}
	return out
}
