package kafka_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
	"github.com/aggflow/aggflow/testkit/benchcost"
)

// The Kafka benchmarks read b.N records of 1,000 keys from a kfake cluster
// in this process and report ns per record, from the consumer's start to
// the last record handled (the group join included, the stop not).
// aggflow runs each partition's keys concurrently, in order per key; the
// baseline is the plain franz-go loop (benchBare): poll, handle each
// record in turn, commit after each poll. The broker runs in the process, so allocations include its.
const benchKeys = 1000

var benchTopics atomic.Int64

// benchCluster starts a cluster with a fresh topic of partitions
// partitions holding n records of benchKeys keys.
func benchCluster(b *testing.B, partitions int32, n int) (*kafkatest.Cluster, string) {
	b.Helper()
	topic := "bench-" + strconv.FormatInt(benchTopics.Add(1), 10)
	c, err := kafkatest.Start(kafkatest.WithTopic(topic, partitions))
	require.NoError(b, err)
	b.Cleanup(c.Close)
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Key: []byte("acct-" + strconv.Itoa(i%benchKeys)), Value: []byte(strconv.Itoa(i/benchKeys + 1))}
	}
	for len(rs) > 0 {
		k := min(len(rs), 50_000)
		require.NoError(b, c.Produce(context.Background(), topic, rs[:k]...))
		rs = rs[k:]
	}
	return c, topic
}

func ioHandler(context.Context)   { time.Sleep(time.Millisecond) } // one millisecond of I/O
func noopHandler(context.Context) {}

// benchAggflow consumes with a Consumer on sched, groups groups per
// partition, and opts.
func benchAggflow(b *testing.B, partitions int32, sched schedulers.Scheduler, groups int, work func(context.Context),
	opts ...kafka.Option) {
	c, topic := benchCluster(b, partitions, b.N)
	var handled atomic.Int64
	var fetched fetchCounter
	all := make(chan struct{})
	n := int64(b.N)
	k, err := kafka.NewConsumer("bench", kafka.Subscription{Brokers: c.Addrs(), Group: topic, Topic: topic}, accounts, sched, codec,
		func(ctx context.Context, _ partition.Delivery[event]) error {
			work(ctx)
			if handled.Add(1) == n {
				close(all)
			}
			return nil
		}, append([]kafka.Option{kafka.WithLogger(quiet), kafka.WithGroups(groups),
			kafka.WithClientOptions(kgo.WithHooks(&fetched))}, opts...)...)
	require.NoError(b, err)
	m := benchcost.Start(b)
	require.NoError(b, k.Prepare(context.Background()))
	require.NoError(b, k.Start())
	<-all
	m.Stop(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(b, k.StopGracefully(ctx))
	b.ReportMetric(float64(k.Stats().Pauses), "pauses")
	b.ReportMetric(float64(k.Stats().Commits)/float64(b.N), "commits/record")
	fetched.report(b)
}

func boundedElastic(b *testing.B, n int) schedulers.Scheduler {
	s, err := schedulers.NewBoundedElastic("bench", n)
	require.NoError(b, err)
	b.Cleanup(s.Dispose)
	return s
}

func parallel(b *testing.B) schedulers.Scheduler {
	s, err := schedulers.NewParallel("bench", schedulers.DefaultPoolSize)
	require.NoError(b, err)
	b.Cleanup(s.Dispose)
	return s
}

// BenchmarkKafka runs both comparisons in one run: one partition of 1,000
// keys with a 1 ms handler (aggflow with 1,000 groups on a bounded elastic
// scheduler of 1,000 goroutines, so every key can wait at once), and eight
// partitions with a no-op handler (aggflow on a parallel scheduler of one
// goroutine per CPU).
func BenchmarkKafka(b *testing.B) {
	b.Run("io-1ms/1-partition/aggflow", func(b *testing.B) {
		benchAggflow(b, 1, boundedElastic(b, benchKeys), benchKeys, ioHandler)
	})
	b.Run("io-1ms/1-partition/plain-loop", func(b *testing.B) { benchBare(b, 1, ioHandler) })
	b.Run("noop/8-partitions/aggflow", func(b *testing.B) { benchAggflow(b, 8, parallel(b), 64, noopHandler) })
	b.Run("noop/8-partitions/plain-loop", func(b *testing.B) { benchBare(b, 8, noopHandler) })
}
