package jetstream_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

func noop(context.Context, partition.Delivery[keyed]) error { return nil }

func newTestConsumer(t *testing.T, e *env, owned []int32, opts ...jetstream.Option) *jetstream.Consumer[keyed] {
	t.Helper()
	c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, noop, opts...)
	require.NoError(t, err)
	return c
}

func TestConnectToAnUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "nats://" + l.Addr().String()
	require.NoError(t, l.Close()) // nobody listens there any more
	_, _, err = jetstream.Connect(url, nats.Timeout(time.Second))
	require.ErrorIs(t, err, jetstream.ErrUnreachable)
	require.ErrorContains(t, err, url)
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

// publishRaw publishes data on partition p's subject with the given headers.
func (e *env) publishRaw(t *testing.T, p int32, hdr nats.Header, data []byte) uint64 {
	t.Helper()
	ack, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: e.topo.Subject(p), Header: hdr, Data: data})
	require.NoError(t, err)
	return ack.Sequence
}

func TestAMessageWithoutTheKeyStopsTheConsumerByDefault(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 5, 2) // sequences 1..10
	bad := e.publishRaw(t, 0, nil, encodeSeq(3))
	e.publish(t, 5, 1) // after it: never delivered
	c := newTestConsumer(t, e, []int32{0})
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	err := c.Err()
	require.ErrorIs(t, err, jetstream.ErrMissingKey)
	require.ErrorContains(t, err, "stream sequence 11")
	require.Equal(t, bad-1, e.ackFloor(t, "c", 0), "what came before is acknowledged, the message is not")
}

func TestARejectHookSettlesTheMessage(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 5, 2)
	missing := e.publishRaw(t, 0, nil, encodeSeq(3))
	undecodable := e.publishRaw(t, 0, nats.Header{jetstream.KeyHeader: []string{"key-1"}}, []byte("short"))
	e.publish(t, 5, 1)
	var reasons []error
	var handled atomic.Int32
	all := make(chan struct{})
	parked := func(_ context.Context, msg natsjs.Msg, err error) error {
		reasons = append(reasons, err) // one goroutine per partition: no lock needed here
		return nil
	}
	count := func(context.Context, partition.Delivery[keyed]) error {
		if handled.Add(1) == 15 {
			close(all)
		}
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, count,
		jetstream.WithRejected(parked))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-all
	require.NoError(t, c.StopGracefully(ctx(t)))
	require.Len(t, reasons, 2)
	require.ErrorIs(t, reasons[0], jetstream.ErrMissingKey)
	require.ErrorIs(t, reasons[1], jetstream.ErrDecode)
	require.ErrorContains(t, reasons[1], "payload of 5 bytes")
	require.Less(t, missing, undecodable)
	require.Equal(t, e.lastSeq(t, 0), e.ackFloor(t, "c", 0), "settled messages are acknowledged with the prefix")
	require.Equal(t, int64(2), c.Stats().Rejected)
}

func TestADecoderPanicIsRejectedAsAPanicError(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 1, 1)
	boom := func(string, natsjs.Msg) (keyed, error) { panic("boom") }
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), jetstream.Codec[keyed]{Decode: boom, ID: keyOf}, noop)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	require.ErrorIs(t, c.Err(), jetstream.ErrDecode)
	var pe *jetstream.PanicError
	require.True(t, errors.As(c.Err(), &pe))
	require.Equal(t, "boom", pe.Value)
	require.Zero(t, e.ackFloor(t, "c", 0))
}

func TestAFailingRejectHookStopsTheConsumer(t *testing.T) {
	e := newEnv(t, 1)
	e.publishRaw(t, 0, nil, encodeSeq(1))
	errPark := errors.New("dead-letter subject unavailable")
	c := newTestConsumer(t, e, []int32{0}, jetstream.WithRejected(func(context.Context, natsjs.Msg, error) error { return errPark }))
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	require.ErrorIs(t, c.Err(), errPark)
	require.ErrorIs(t, c.Err(), jetstream.ErrMissingKey)
	require.Zero(t, e.ackFloor(t, "c", 0))
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
