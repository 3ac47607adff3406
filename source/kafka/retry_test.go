package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

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
