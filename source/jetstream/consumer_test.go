package jetstream_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// handledLog records what a handler saw, per key, in handling order.
type handledLog struct {
	mu    sync.Mutex
	byKey map[string][]uint64
	n     int
	all   chan struct{}
	want  int
}

func newHandledLog(want int) *handledLog {
	return &handledLog{byKey: map[string][]uint64{}, all: make(chan struct{}), want: want}
}

func (l *handledLog) handle(_ context.Context, d partition.Delivery[keyed]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byKey[d.Exchange.Key] = append(l.byKey[d.Exchange.Key], d.Exchange.Seq)
	l.n++
	if l.n == l.want {
		close(l.all)
	}
	return nil
}

func newSched(t testing.TB) schedulers.Scheduler {
	s, err := schedulers.NewParallel("test", 4)
	require.NoError(t, err)
	t.Cleanup(s.Dispose)
	return s
}

func TestConsumerHandlesEveryPartitionInOrderAndAcksThePrefix(t *testing.T) {
	e := newEnv(t, 4)
	const keys, perKey = 50, 40
	e.publish(t, keys, perKey)
	log := newHandledLog(keys * perKey)
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1, 2, 3}), named, newSched(t), keyedCodec, log.handle,
		jetstream.WithMaxPending(64))
	require.NoError(t, err)
	r, err := component.NewRuntime("rt", []component.Component{c})
	require.NoError(t, err)
	require.NoError(t, r.Prepare(ctx(t)))
	require.NoError(t, r.Start())
	select {
	case <-log.all:
	case <-ctx(t).Done():
		t.Fatalf("handled %d of %d", log.n, keys*perKey)
	}
	require.NoError(t, r.StopGracefully(ctx(t)))
	require.Equal(t, component.StateStopped, c.State())

	for k := range keys {
		seqs := log.byKey[keyName(k)]
		require.Len(t, seqs, perKey)
		for i, s := range seqs {
			require.Equal(t, uint64(i+1), s, "key %d", k)
		}
	}
	for p := range int32(4) {
		require.Equal(t, e.lastSeq(t, p), e.ackFloor(t, "c", p), "partition %d acked to its end", p)
	}
	st := c.Stats()
	require.Equal(t, int64(keys*perKey), st.Fetched)
	require.Equal(t, dispatch.Stats{Received: keys * perKey, Succeeded: keys * perKey}, st.Exchanges)
}
