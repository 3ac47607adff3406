package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/testkit"
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

// A log handler that ends the assigning goroutine with runtime.Goexit (on
// the line of a partition claimed) fails the consumer, which stops on its
// own with the Goexit as its error, rather than going on without renewals
// or balance, with a stop that waits for that goroutine forever.
func TestALoggerGoexitOnTheAssigningGoroutineFailsTheConsumer(t *testing.T) {
	e := newEnv(t, 2)
	logs := &testkit.LogGoexit{Message: "jetstream: partition claimed"}
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
			t.Fatalf("the consumer did not stop on its own after the Goexit (the handler exited: %v)", logs.Exited())
		case <-time.After(10 * time.Second):
			t.Fatalf("the consumer did not stop after the Goexit, nor after a ForceStop (the handler exited: %v)", logs.Exited())
		}
	}
	require.True(t, logs.Exited(), "the log handler ended the assigning goroutine")
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

func TestPrepareOnAClosedConnection(t *testing.T) {
	e := newEnv(t, 2)
	c := newTestConsumer(t, e, []int32{0})
	e.nc.Close()
	err := c.Prepare(ctx(t))
	require.ErrorIs(t, err, jetstream.ErrUnreachable)
	<-c.Done()
	require.Equal(t, component.StateStopped, c.State())
}

func TestPrepareWithoutTheStream(t *testing.T) {
	e := newEnv(t, 2)
	e.topo.Stream = "MISSING"
	c := newTestConsumer(t, e, []int32{0})
	err := c.Prepare(ctx(t))
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	require.ErrorContains(t, err, `"MISSING"`)
	<-c.Done()
	require.ErrorIs(t, c.Err(), jetstream.ErrStreamNotFound)
}

func TestPrepareWithSubjectsForAnotherPartitionCount(t *testing.T) {
	for name, subjects := range map[string][]string{
		"fewer":    {"ex.0", "ex.1"},
		"more":     {"ex.0", "ex.1", "ex.2", "ex.3", "ex.4"},
		"wildcard": {"ex.*"},
		"prefix":   {"other.0", "other.1", "other.2", "other.3"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 4)
			_, err := e.js.UpdateStream(ctx(t), natsjs.StreamConfig{Name: "EX", Subjects: subjects, Storage: natsjs.MemoryStorage})
			require.NoError(t, err)
			err = newTestConsumer(t, e, []int32{0}).Prepare(ctx(t))
			require.ErrorIs(t, err, jetstream.ErrSubjectsMismatch)
			require.ErrorContains(t, err, "4 partitions")
		})
	}
}

func TestNewConsumerRefusesInvalidArguments(t *testing.T) {
	e := newEnv(t, 4)
	sched := newSched(t)
	type arguments struct {
		name    string
		sub     jetstream.Subscription
		named   aggregate.NamedAggregate
		sched   schedulers.Scheduler
		codec   jetstream.Codec[keyed]
		handler dispatch.Handler[partition.Delivery[keyed]]
		opts    []jetstream.Option
	}
	valid := func() arguments { return arguments{"c", e.sub([]int32{0}), named, sched, keyedCodec, noop, nil} }
	newConsumer := func(a arguments) error {
		_, err := jetstream.NewConsumer(a.name, a.sub, a.named, a.sched, a.codec, a.handler, a.opts...)
		return err
	}
	require.NoError(t, newConsumer(valid()), "the arguments every case changes one of")
	for name, c := range map[string]struct {
		change func(*arguments)
		says   string // the field at fault, as the error names it
	}{
		"no name":      {func(a *arguments) { a.name = "" }, "needs a name"},
		"no JetStream": {func(a *arguments) { a.sub.JetStream = nil }, "Subscription.JetStream is nil"},
		"no decoder":   {func(a *arguments) { a.codec.Decode = nil }, "Codec.Decode is nil"},
		"no id":        {func(a *arguments) { a.codec.ID = nil }, "Codec.ID is nil"},
		"no named":     {func(a *arguments) { a.named = nil }, "the named aggregate is nil"},
		"no scheduler": {func(a *arguments) { a.sched = nil }, "the scheduler is nil"},
		"no handler":   {func(a *arguments) { a.handler = nil }, "the handler is nil"},
		"no partition": {func(a *arguments) { a.sub.Owned = nil }, "Subscription.Owned is empty"},
		"partition out of range": {func(a *arguments) { a.sub.Owned = []int32{4} },
			"Subscription.Owned: partition 4 out of [0, 4)"},
		"partition twice":     {func(a *arguments) { a.sub.Owned = []int32{1, 1} }, "Subscription.Owned: partition 1"},
		"bad stream name":     {func(a *arguments) { a.sub.Topology.Stream = "a.b" }, `jetstream: invalid argument: stream name "a.b" (consumer "c", Subscription.Topology)`},
		"bad prefix":          {func(a *arguments) { a.sub.Topology.Prefix = "ex.*" }, `jetstream: invalid argument: subject prefix "ex.*" (consumer "c", Subscription.Topology)`},
		"no partitions":       {func(a *arguments) { a.sub.Topology.Partitions = 0 }, `jetstream: invalid argument: 0 partitions (consumer "c", Subscription.Topology)`},
		"no budget":           {func(a *arguments) { a.opts = []jetstream.Option{jetstream.WithMaxPending(0)} }, "pending budget 0"},
		"no bound held":       {func(a *arguments) { a.opts = []jetstream.Option{jetstream.WithMaxHeld(0, 0)} }, "max held 0 records"},
		"negative bytes held": {func(a *arguments) { a.opts = []jetstream.Option{jetstream.WithMaxHeld(10, -1)} }, "max held 10 records, -1 bytes"},
		"bad durable":         {func(a *arguments) { a.opts = []jetstream.Option{jetstream.WithDurable("a.b")} }, `durable name "a.b"`},
		"max ack pending below the budget": {func(a *arguments) {
			a.opts = []jetstream.Option{jetstream.WithMaxPending(100), jetstream.WithMaxAckPending(10)}
		}, "max ack pending 10 below the pending budget 100"},
	} {
		a := valid()
		c.change(&a)
		err := newConsumer(a)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, name)
		require.ErrorContains(t, err, c.says, name)
	}
}

func TestLifecycleStates(t *testing.T) {
	e := newEnv(t, 2)
	c := newTestConsumer(t, e, []int32{0, 1})
	require.ErrorIs(t, c.Start(), jetstream.ErrIllegalState, "Start before Prepare")
	require.NoError(t, c.Prepare(ctx(t)))
	require.ErrorIs(t, c.Prepare(ctx(t)), jetstream.ErrIllegalState, "Prepare twice")
	_, err := c.Revoke(ctx(t), 0)
	require.ErrorIs(t, err, jetstream.ErrIllegalState, "Revoke before Start")
	require.NoError(t, c.Start())
	require.Equal(t, component.StateRunning, c.State())
	require.Equal(t, []int32{0, 1}, c.Owned())
	require.NoError(t, c.StopGracefully(ctx(t)))
	require.Equal(t, component.StateStopped, c.State())
	require.ErrorIs(t, c.Start(), jetstream.ErrIllegalState, "no restart")
	require.ErrorIs(t, c.Start(), dispatch.ErrIllegalState, "the refusals are the lifecycle's too")
	_, err = c.Revoke(ctx(t), 0)
	require.ErrorIs(t, err, dispatch.ErrIllegalState, "Revoke after the stop")

	quiet := newTestConsumer(t, e, []int32{0})
	quiet.Quiesce() // before Prepare: stopped at once
	<-quiet.Done()
	require.NoError(t, quiet.Err())

	forced := newTestConsumer(t, e, []int32{0})
	require.NoError(t, forced.Prepare(ctx(t)))
	require.NoError(t, forced.Start())
	forced.ForceStop()
	require.Equal(t, component.StateStopped, forced.State(), "stopped at once, before Done")
	forced.ForceStop() // idempotent
	<-forced.Done()
	require.Equal(t, component.StateStopped, forced.State())

	// A stop while Start runs (here, before it): Start is refused, nothing
	// was started, and Done closes.
	early := newTestConsumer(t, e, []int32{0})
	require.NoError(t, early.Prepare(ctx(t)))
	early.Quiesce()
	require.ErrorIs(t, early.Start(), dispatch.ErrIllegalState)
	<-early.Done()
	require.NoError(t, early.Err())
}

func TestForceStopAcknowledgesNothingMore(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 10, 10)
	release := make(chan struct{})
	var handled atomic.Int32
	block := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if handled.Add(1) == 50 {
			close(release)
		}
		if handled.Load() >= 50 {
			<-ctx.Done() // the rest run until the force
			return ctx.Err()
		}
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, block)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-release
	floor := e.ackFloor(t, "c", 0)
	c.ForceStop()
	<-c.Done()
	require.LessOrEqual(t, e.ackFloor(t, "c", 0), uint64(49), "nothing at or above the first cancelled exchange")
	require.GreaterOrEqual(t, e.ackFloor(t, "c", 0), floor)
}

// A graceful stop whose ctx ends while a handler blocks says which
// partitions still drain; ForceStop then ends it without acknowledging
// the blocked exchange.
func TestStopGracefullyTimesOutNamingThePartitions(t *testing.T) {
	e := newEnv(t, 2)
	e.publish(t, 4, 1)
	blocked := make(chan struct{}, 4)
	block := func(ctx context.Context, d partition.Delivery[keyed]) error {
		blocked <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1}), named, newSched(t), keyedCodec, block)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-blocked
	expired, cancel := context.WithCancel(ctx(t))
	cancel()
	err = c.StopGracefully(expired)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "draining")
	c.ForceStop()
	<-c.Done()
	for p := range int32(2) {
		require.Zero(t, e.ackFloor(t, "c", p), "nothing was handled")
	}
}

// A graceful stop whose ctx ends while a partition drains returns an error
// naming that partition (docs/lifecycle.md: it "names what is still
// running"). A revocation takes the partition out of Owned before its drain,
// so the error must not be built from Owned alone.
func TestAStopThatTimesOutNamesThePartitionStillDraining(t *testing.T) {
	e := newEnv(t, 4)
	e.publish(t, 1, 1) // one exchange, in the partition of keyName(0)
	p := e.topo.PartitionOf(keyName(0))
	running, release := make(chan struct{}), make(chan struct{})
	handler := func(context.Context, partition.Delivery[keyed]) error {
		close(running)
		<-release // ignores its ctx: the drain cannot end before the stop's deadline
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{p}), named, newSched(t), keyedCodec, handler)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })
	<-running

	stopCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = c.StopGracefully(stopCtx)
	close(release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	want := fmt.Sprintf("[%d]", p)
	require.Truef(t, strings.Contains(err.Error(), want), "the error %q names no partition %s", err, want)
}
