package kafka_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

func noop(context.Context, partition.Delivery[event]) error { return nil }

func TestNewConsumerRefusesInvalidArguments(t *testing.T) {
	sched := newScheduler(t, 1)
	sub := kafka.Subscription{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topic: "t"}
	cases := map[string]func() error{
		"no name": func() error {
			_, err := kafka.NewConsumer("", sub, accounts, sched, codec, noop)
			return err
		},
		"no brokers": func() error {
			_, err := kafka.NewConsumer("c", kafka.Subscription{Group: "g", Topic: "t"}, accounts, sched, codec, noop)
			return err
		},
		"no group": func() error {
			_, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: sub.Brokers, Topic: "t"}, accounts, sched, codec, noop)
			return err
		},
		"no topic": func() error {
			_, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: sub.Brokers, Group: "g"}, accounts, sched, codec, noop)
			return err
		},
		"no scheduler": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, nil, codec, noop)
			return err
		},
		"no decoder": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, kafka.Codec[event]{ID: codec.ID}, noop)
			return err
		},
		"no handler": func() error {
			_, err := kafka.NewConsumer[event]("c", sub, accounts, sched, codec, nil)
			return err
		},
		"budget 0": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, codec, noop, kafka.WithMaxPending(0))
			return err
		},
		"finished map length -1": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, codec, noop, kafka.WithFinishedMapLen(-1))
			return err
		},
		"max held 0": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, codec, noop, kafka.WithMaxHeld(0, 0))
			return err
		},
		"max held bytes negative": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, codec, noop, kafka.WithMaxHeld(10, -1))
			return err
		},
		"revoke timeout 0": func() error {
			_, err := kafka.NewConsumer("c", sub, accounts, sched, codec, noop, kafka.WithRevokeTimeout(0))
			return err
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := f()
			require.ErrorIs(t, err, kafka.ErrInvalidArgument)
			require.Contains(t, err.Error(), "kafka: ")
		})
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestPrepareFailsOnUnreachableBrokers(t *testing.T) {
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: []string{freePort(t)}, Group: "g", Topic: "t"},
		accounts, newScheduler(t, 1), codec, noop, kafka.WithConnectTimeout(300*time.Millisecond), kafka.WithLogger(quiet))
	require.NoError(t, err)
	err = k.Prepare(context.Background())
	require.ErrorIs(t, err, kafka.ErrUnreachable)
	require.Equal(t, component.StateNew, k.State())
	require.ErrorIs(t, k.Start(), kafka.ErrIllegalState, "no start without a successful Prepare")
	k.ForceStop()
	<-k.Done()
	require.Equal(t, component.StateStopped, k.State())
}

func TestPrepareFailsOnAMissingTopic(t *testing.T) {
	c := startCluster(t, "present", 1)
	k := newConsumer(t, c, "g", "absent", newScheduler(t, 1), noop)
	err := k.Prepare(context.Background())
	require.ErrorIs(t, err, kafka.ErrNoTopic)
	require.Contains(t, err.Error(), `"absent"`)
	k.ForceStop()
	<-k.Done()
}

// badRecords has a record without a key and one whose value does not
// decode between good ones, all in one partition.
func badRecords() []*kgo.Record {
	return []*kgo.Record{
		{Key: []byte("a"), Value: []byte("1")},
		{Value: []byte("2")}, // no key
		{Key: []byte("a"), Value: []byte("two")},
		{Key: []byte("a"), Value: []byte("2")},
	}
}

// reasons collects what the bad-record hook was told.
type reasons struct {
	mu      sync.Mutex
	offsets []int64
	errs    []error
}

func (r *reasons) hook(result error) kafka.BadRecordHook {
	return func(_ context.Context, rec *kgo.Record, reason error) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.offsets = append(r.offsets, rec.Offset)
		r.errs = append(r.errs, reason)
		return result
	}
}

// Bad records are discarded with their reason, counted, and committed past;
// the good ones around them are handled.
func TestBadRecordsAreDiscardedWithTheReason(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", badRecords()...))
	var r reasons
	j := newJournal(2)
	k := newConsumer(t, c, "g", "bad", newScheduler(t, 2), j.handle, kafka.WithBadRecordHook(r.hook(nil)))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)

	require.Equal(t, map[string][]int{"a": {1, 2}}, j.seen)
	require.Equal(t, []int64{1, 2}, r.offsets)
	require.ErrorIs(t, r.errs[0], kafka.ErrNoKey)
	require.ErrorIs(t, r.errs[1], kafka.ErrDecode)
	require.Contains(t, r.errs[1].Error(), `sequence "two"`, "the decoder's error is kept")
	require.Equal(t, int64(2), k.Stats().Discarded)
	require.Equal(t, int64(2), k.Stats().Delivered)
	committed, err := c.Committed(ctx, "g", "bad")
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 4}, committed)
}

// A hook that refuses a bad record stops the consumer with an error that
// names the reason; nothing after the bad record is handled or committed.
func TestABadRecordTheHookRefusesStopsTheConsumer(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", badRecords()...))
	var r reasons
	poison := errors.New("poison")
	var mu sync.Mutex
	var seen []int
	k := newConsumer(t, c, "g", "bad", newScheduler(t, 2), func(_ context.Context, d partition.Delivery[event]) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, d.Exchange.Seq)
		return nil
	}, kafka.WithBadRecordHook(r.hook(poison)))
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the consumer did not stop")
	}
	err := k.Err()
	require.ErrorIs(t, err, kafka.ErrBadRecord)
	require.ErrorIs(t, err, kafka.ErrNoKey)
	require.ErrorIs(t, err, poison)
	require.Equal(t, []int{1}, seen)
	committed, cerr := c.Committed(ctx, "g", "bad")
	require.NoError(t, cerr)
	require.Equal(t, map[int32]int64{0: 1}, committed, "committed up to the bad record, not past it")
}

// A decoder's panic is the record's decode failure, as a *PanicError.
func TestADecoderPanicIsADecodeFailure(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", &kgo.Record{Key: []byte("a"), Value: []byte("boom")},
		&kgo.Record{Key: []byte("a"), Value: []byte("1")}))
	var r reasons
	j := newJournal(1)
	panicky := kafka.Codec[event]{Decode: func(key, value []byte) (event, error) {
		if string(value) == "boom" {
			panic("boom")
		}
		return codec.Decode(key, value)
	}, ID: codec.ID}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "bad"}, accounts,
		newScheduler(t, 1), panicky, j.handle, kafka.WithLogger(quiet), kafka.WithBadRecordHook(r.hook(nil)))
	require.NoError(t, err)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Len(t, r.errs, 1)
	require.ErrorIs(t, r.errs[0], kafka.ErrDecode)
	var pe *kafka.PanicError
	require.ErrorAs(t, r.errs[0], &pe)
	require.Equal(t, "boom", pe.Value)
}

func TestLifecycleRefusals(t *testing.T) {
	c := startCluster(t, "life", 1)
	k := newConsumer(t, c, "g", "life", newScheduler(t, 1), noop)
	require.ErrorIs(t, k.Start(), kafka.ErrIllegalState, "start before prepare")
	require.ErrorIs(t, k.Start(), dispatch.ErrIllegalState, "the core's sentinel too")
	require.NoError(t, k.Prepare(context.Background()))
	require.ErrorIs(t, k.Prepare(context.Background()), kafka.ErrIllegalState, "prepare twice")
	require.NoError(t, k.Start())
	require.Equal(t, component.StateRunning, k.State())
	require.ErrorIs(t, k.Start(), kafka.ErrIllegalState, "start twice")
	stop(t, k)
	require.Equal(t, component.StateStopped, k.State())
	stop(t, k) // idempotent
	k.ForceStop()
	require.NoError(t, k.Err())
}
