package jetstream_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// exitsOn is a slog.Handler that ends the goroutine logging with
// runtime.Goexit on the first record of one message (a test's t.FailNow in
// a log handler) and drops every record.
type exitsOn struct {
	msg    string
	exited atomic.Bool
}

func (h *exitsOn) Enabled(context.Context, slog.Level) bool { return true }

func (h *exitsOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg && h.exited.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return nil
}

func (h *exitsOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *exitsOn) WithGroup(string) slog.Handler      { return h }

// A log handler that ends the assigning goroutine with runtime.Goexit (on
// the line of a partition claimed) fails the consumer, which stops on its
// own with the Goexit as its error, rather than going on without renewals
// or balance, with a stop that waits for that goroutine forever.
func TestALoggerGoexitOnTheAssigningGoroutineFailsTheConsumer(t *testing.T) {
	e := newEnv(t, 2)
	logs := &exitsOn{msg: "jetstream: partition claimed"}
	c, err := jetstream.NewConsumer("c", e.sub(nil), named, newSched(t), keyedCodec, noop,
		jetstream.WithDynamicAssignment("a", 5*time.Second), jetstream.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		c.ForceStop()
		select {
		case <-c.Done():
			t.Fatalf("the consumer did not stop on its own after the Goexit (the handler exited: %v)", logs.exited.Load())
		case <-time.After(10 * time.Second):
			t.Fatalf("the consumer did not stop after the Goexit, nor after a ForceStop (the handler exited: %v)", logs.exited.Load())
		}
	}
	require.True(t, logs.exited.Load(), "the log handler ended the assigning goroutine")
	require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
	require.ErrorContains(t, c.Err(), "assigning")
}

// Every refusal of NewConsumer reads as the package's errors do, from the
// package's name on ("jetstream: invalid argument: consumer ..."), as those
// of the Subscription's and the Codec's fields do; the refusals of an option
// and of the Topology begin with `consumer "c": ` instead, the sentinel
// in the middle.
func TestNewConsumerRefusalsBeginWithThePackage(t *testing.T) {
	e := newEnv(t, 2)
	for name, c := range map[string]struct {
		owned []int32
		topo  func(*jetstream.Topology)
		opts  []jetstream.Option
	}{
		"owned out of range": {owned: []int32{2}},
		"short ttl":          {opts: []jetstream.Option{jetstream.WithDynamicAssignment("a", time.Millisecond)}},
		"no budget":          {owned: []int32{0}, opts: []jetstream.Option{jetstream.WithMaxPending(0)}},
		"bad stream name":    {owned: []int32{0}, topo: func(tp *jetstream.Topology) { tp.Stream = "a.b" }},
	} {
		sub := e.sub(c.owned)
		if c.topo != nil {
			c.topo(&sub.Topology)
		}
		_, err := jetstream.NewConsumer("c", sub, named, newSched(t), keyedCodec, noop, c.opts...)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, name)
		assert.True(t, strings.HasPrefix(err.Error(), "jetstream: "), "%s: %q", name, err)
	}
}
