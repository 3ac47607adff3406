package kafka_test

import (
	"context"
	"strconv"
	"sync"
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

// BenchmarkBindingCost is the Consumer's own cost beside a bare franz-go
// loop, in one run, on the same kfake cluster (in this process), over a
// preloaded backlog of b.N records of 1,000 keys on 8 partitions: with a
// no-op handler and with a handler that spins 1 µs. The bare loop polls,
// decodes and handles each record in turn on the polling goroutine and
// commits what it polled after each poll (autocommit off); the Consumer
// runs on a parallel scheduler of one goroutine per CPU with 64 groups per
// partition, and again with partition fetches of 64 KiB (a pause drops the
// partition's buffered fetch, fetched again on resume: see fetched/record).
// Each reports ns/record (wall, from the client's start to the
// last record handled), cpu-ns/record (the process's user and system time,
// the broker's included), allocs/record (the broker's included) and
// records/s; compare a binding's figures with its bare loop's of the same
// run (ratios), not across runs.
//
//	go -C source/kafka test -run '^$' -bench BindingCost -benchtime 400000x -count 3 .
func BenchmarkBindingCost(b *testing.B) {
	for _, h := range []struct {
		name string
		work func(context.Context)
	}{{"noop", noopHandler}, {"spin-1us", spinHandler}} {
		b.Run(h.name+"/bare", func(b *testing.B) { benchBare(b, 8, h.work) })
		b.Run(h.name+"/binding", func(b *testing.B) { benchAggflow(b, 8, parallel(b), 64, h.work) })
		b.Run(h.name+"/binding-fetch-64KiB", func(b *testing.B) {
			benchAggflow(b, 8, parallel(b), 64, h.work,
				kafka.WithClientOptions(kgo.FetchMaxPartitionBytes(64<<10)))
		})
	}
}

// fetchCounter counts the records the client read from fetch responses:
// more than were handled when records are fetched again (a paused
// partition's buffered fetch is dropped by the client).
type fetchCounter struct{ n atomic.Int64 }

func (f *fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.n.Add(int64(m.NumRecords))
}

// report reports the records fetched per record handled.
func (f *fetchCounter) report(b *testing.B) {
	b.ReportMetric(float64(f.n.Load())/float64(b.N), "fetched/record")
}

// spinHandler is a handler busy for 1 µs.
func spinHandler(context.Context) { benchcost.Spin(time.Microsecond) }

// benchBare is the bare client loop: poll, decode and handle in turn,
// commit the polled offsets synchronously after each poll.
func benchBare(b *testing.B, partitions int32, work func(context.Context)) {
	c, topic := benchCluster(b, partitions, b.N)
	ctx := context.Background()
	var fetched fetchCounter
	defer fetched.report(b)
	m := benchcost.Start(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup(topic), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.WithHooks(&fetched))
	require.NoError(b, err)
	defer cl.Close()
	for handled := 0; handled < b.N; {
		fs := cl.PollFetches(ctx)
		require.NoError(b, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			if _, err := codec.Decode(r.Key, r.Value); err == nil {
				work(ctx)
			}
			handled++
		})
		require.NoError(b, cl.CommitUncommittedOffsets(ctx))
		cl.AllowRebalance()
	}
	m.Stop(b)
}

// BenchmarkFirstRunUnderABacklog measures how long after the first
// partition's first record the last of 8 partitions runs its first, with 1
// ms handlers on g goroutines and a backlog of 12,000 records a partition
// (more than a partition's share of the default budget): partitions served
// in turns (docs/tuning.md, "Broker consumers"). It reports the spread in
// seconds; b.N is ignored beyond the loop.
func BenchmarkFirstRunUnderABacklog(b *testing.B) {
	for _, g := range []int{6, 64} {
		for _, budget := range []int{kafka.DefaultMaxPending, 1000} {
			b.Run("goroutines="+strconv.Itoa(g)+"/budget="+strconv.Itoa(budget), func(b *testing.B) {
				for b.Loop() {
					b.ReportMetric(firstRunSpread(b, g, budget).Seconds(), "s-spread")
				}
			})
		}
	}
}

func firstRunSpread(b *testing.B, g, budget int) time.Duration {
	const partitions = 8
	c, topic := benchCluster(b, partitions, partitions*12_000)
	sched, err := schedulers.NewBoundedElastic("turns", g)
	require.NoError(b, err)
	defer sched.Dispose()
	var mu sync.Mutex
	first := map[int32]time.Time{}
	all := make(chan struct{})
	k, err := kafka.NewConsumer("turns", kafka.Subscription{Brokers: c.Addrs(), Group: topic, Topic: topic}, accounts, sched, codec,
		func(ctx context.Context, d partition.Delivery[event]) error {
			mu.Lock()
			if _, ok := first[d.Partition]; !ok {
				first[d.Partition] = time.Now()
				if len(first) == partitions {
					close(all)
				}
			}
			mu.Unlock()
			ioHandler(ctx)
			return nil
		}, kafka.WithLogger(quiet), kafka.WithMaxPending(budget))
	require.NoError(b, err)
	require.NoError(b, k.Prepare(context.Background()))
	require.NoError(b, k.Start())
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		b.Fatal("not every partition ran")
	}
	k.ForceStop()
	<-k.Done()
	mu.Lock()
	defer mu.Unlock()
	lo, hi := first[0], first[0]
	for _, t := range first {
		if t.Before(lo) {
			lo = t
		}
		if t.After(hi) {
			hi = t
		}
	}
	return hi.Sub(lo)
}
