package kafka_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

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
