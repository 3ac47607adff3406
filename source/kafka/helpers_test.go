package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

var accounts = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// event is the test exchange: the aggregate it addresses and its sequence
// number for that aggregate, from 1.
type event struct {
	ID  string
	Seq int
}

var codec = kafka.Codec[event]{
	Decode: func(key, value []byte) (event, error) {
		seq, err := strconv.Atoi(string(value))
		if err != nil {
			return event{}, fmt.Errorf("sequence %q: %w", value, err)
		}
		return event{ID: string(key), Seq: seq}, nil
	},
	ID: func(e event) string { return e.ID },
}

// records returns keys x perKey records: key k's records carry 1..perKey,
// interleaved across keys.
func records(keys, perKey int) []*kgo.Record {
	rs := make([]*kgo.Record, 0, keys*perKey)
	for seq := 1; seq <= perKey; seq++ {
		for k := range keys {
			rs = append(rs, &kgo.Record{Key: []byte("acct-" + strconv.Itoa(k)), Value: []byte(strconv.Itoa(seq))})
		}
	}
	return rs
}

// journal records what the handlers ran, per key, in the order they ran.
type journal struct {
	mu   sync.Mutex
	seen map[string][]int
	n    int
	want int
	all  chan struct{}
}

func newJournal(want int) *journal {
	return &journal{seen: map[string][]int{}, want: want, all: make(chan struct{})}
}

func (j *journal) handle(_ context.Context, d partition.Delivery[event]) error {
	j.add(d.Exchange)
	return nil
}

func (j *journal) add(e event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seen[e.ID] = append(j.seen[e.ID], e.Seq)
	j.n++
	if j.n == j.want {
		close(j.all)
	}
}

// check asserts every key's sequence ran in order and none is missing: a
// sequence may only go back to replay (duplicates as in-order replays).
// It returns the number of duplicates.
func (j *journal) check(t require.TestingT, keys, perKey int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return checkOrder(t, j.seen, keys, perKey)
}

func checkOrder(t require.TestingT, seen map[string][]int, keys, perKey int) int {
	require.Len(t, seen, keys, "keys handled")
	dups := 0
	for id, seqs := range seen {
		next := 1 // the lowest sequence not handled yet
		for i, s := range seqs {
			switch {
			case s == next:
				next++
			case s < next:
				// A replay starts again at or below the last one handled
				// and goes on in order from there.
				dups++
				require.True(t, i > 0 && (s <= seqs[i-1] || s == seqs[i-1]+1), "%s: %d after %v is a reordering, not a replay", id, s, seqs[max(0, i-3):i])
			default:
				require.Failf(t, "gap", "%s: %d handled before %d", id, s, next)
			}
		}
		require.Equal(t, perKey+1, next, "%s: sequences handled", id)
	}
	return dups
}

func (j *journal) wait(t *testing.T, timeout time.Duration) {
	select {
	case <-j.all:
	case <-time.After(timeout):
		j.mu.Lock()
		defer j.mu.Unlock()
		require.FailNow(t, "timed out", "%d of %d handled", j.n, j.want)
	}
}

// shortSessions lets a group's members use sessions of a second
// (memberClientOptions), so that rebalances take milliseconds.
var shortSessions = kafkatest.WithFakeOptions(kfake.GroupMinSessionTimeout(500 * time.Millisecond))

func startCluster(t *testing.T, topic string, partitions int32, opts ...kafkatest.Option) *kafkatest.Cluster {
	t.Helper()
	c, err := kafkatest.Start(append([]kafkatest.Option{kafkatest.WithTopic(topic, partitions)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newScheduler(t *testing.T, n int) schedulers.Scheduler {
	t.Helper()
	s, err := schedulers.NewParallel("test", n)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.DisposeGracefully(ctx))
	})
	return s
}

func newConsumer(t *testing.T, c *kafkatest.Cluster, group, topic string, sched schedulers.Scheduler,
	h dispatch.Handler[partition.Delivery[event]], opts ...kafka.Option) *kafka.Consumer[event] {
	t.Helper()
	opts = append([]kafka.Option{kafka.WithLogger(quiet)}, opts...)
	k, err := kafka.NewConsumer("test", kafka.Subscription{Brokers: c.Addrs(), Group: group, Topic: topic},
		accounts, sched, codec, h, opts...)
	require.NoError(t, err)
	return k
}

func startConsumer(t *testing.T, k *kafka.Consumer[event]) {
	t.Helper()
	require.NoError(t, k.Prepare(context.Background()))
	require.NoError(t, k.Start())
	t.Cleanup(func() { k.ForceStop(); <-k.Done() })
}

func stop(t *testing.T, k *kafka.Consumer[event]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, k.StopGracefully(ctx))
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func noop(context.Context, partition.Delivery[event]) error { return nil }

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
