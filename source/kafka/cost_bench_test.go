package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/testkit/benchcost"
)

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
