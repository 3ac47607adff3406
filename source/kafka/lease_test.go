package kafka_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/testkit"
)

// recordsOf returns the records of sequences from..to of keys keys.
func recordsOf(keys, from, to int) []*kgo.Record {
	var rs []*kgo.Record
	for seq := from; seq <= to; seq++ {
		for k := range keys {
			rs = append(rs, &kgo.Record{Key: []byte("acct-" + strconv.Itoa(k)), Value: []byte(strconv.Itoa(seq))})
		}
	}
	return rs
}

// A heartbeat the group answers late, 3.6 s after it was sent, within the
// 4 s session: the leases lapse (3.2 s after the last answered request was
// sent) though the group kept the member. The consumer forces the
// partition and assigns it again from its last commit, under a lease valid
// from the second heartbeat after, and goes on: every record handled, in
// order, all under the one generation (the group never fenced it).
func TestLapsedLeaseTheGroupKeptIsRenewed(t *testing.T) { lapseRenewed(t) }

// A log handler that panics on the lapse's warning costs the line: the
// partition is still forced, assigned again and handled to its end.
func TestLapsedLeaseLogHandlerPanics(t *testing.T) {
	lapseRenewed(t, kafka.WithLogger(slog.New(&testkit.LogPanic{Prefix: "kafka: lease lapsed"})))
}

func lapseRenewed(t *testing.T, opts ...kafka.Option) {
	const keys, perKey, stall = 20, 10, 3600 * time.Millisecond
	c := startCluster(t, "lapse", 1, shortSessions)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "lapse", recordsOf(keys, 1, perKey/2)...))
	var mu sync.Mutex
	epochs := map[uint64]bool{}
	j := newJournal(keys * perKey)
	first := newJournal(keys * perKey / 2)
	k := newConsumer(t, c, "lapse", "lapse", newScheduler(t, 4), func(ctx context.Context, d partition.Delivery[event]) error {
		l, ok := kafka.LeaseOf(ctx)
		require.True(t, ok)
		mu.Lock()
		epochs[l.Epoch] = true
		mu.Unlock()
		j.add(d.Exchange)
		first.add(d.Exchange)
		return nil
	}, append([]kafka.Option{kafka.WithClientOptions(kgo.SessionTimeout(4*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond))}, opts...)...)
	startConsumer(t, k)
	first.wait(t, 20*time.Second)

	var stalled atomic.Bool
	c.Fake().ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		if stalled.CompareAndSwap(false, true) {
			c.Fake().SleepControl(func() { <-time.After(stall) }) // the fault: a late answer
		}
		return nil, nil, false // handled as usual
	})
	require.Eventually(t, func() bool { return k.Stats().Lapsed > 0 }, 20*time.Second, 10*time.Millisecond, "the lease lapsed")
	require.NoError(t, c.Produce(ctx, "lapse", recordsOf(keys, perKey/2+1, perKey)...))
	j.wait(t, 20*time.Second)
	stop(t, k)

	dups := j.check(t, keys, perKey)
	s := k.Stats()
	t.Logf("%+v, %d duplicates", s, dups)
	require.Positive(t, s.Lost, "the lapsed partition was forced")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, epochs, 1, "the group kept the member: no rebalance, one generation")
}
