package kafka_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// Every record of every partition is handled once, in per-key order, and
// the committed offsets after a graceful stop are the end of each
// partition.
func TestConsumesInOrderAndCommitsTheEnd(t *testing.T) {
	const keys, perKey = 200, 50
	c := startCluster(t, "orders", 4)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "orders", records(keys, perKey)...))

	j := newJournal(keys * perKey)
	k := newConsumer(t, c, "g", "orders", newScheduler(t, 4), j.handle)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey), "duplicates")

	committed, err := c.Committed(ctx, "g", "orders")
	require.NoError(t, err)
	total := int64(0)
	for _, off := range committed {
		total += off
	}
	require.Len(t, committed, 4)
	require.Equal(t, int64(keys*perKey), total, "committed offsets add up to every record")
	require.Equal(t, int64(keys*perKey), k.Stats().Delivered)
	require.Equal(t, int64(keys*perKey), k.Stats().Succeeded)
	require.Zero(t, k.Stats().Dropped)
}

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

// A graceful stop whose ctx ends while a partition drains returns an error
// naming that partition (docs/lifecycle.md: it "names what is still
// running"). The revocation takes the partition out of Owned before its
// drain, so the error must not be built from Owned alone.
func TestAStopThatTimesOutNamesThePartitionStillDraining(t *testing.T) {
	c := startCluster(t, "draining", 1)
	require.NoError(t, c.Produce(context.Background(), "draining", records(1, 1)...))
	running, release := make(chan struct{}), make(chan struct{})
	handler := func(context.Context, partition.Delivery[event]) error {
		close(running)
		<-release // ignores its ctx: the drain cannot end before the stop's deadline
		return nil
	}
	k := newConsumer(t, c, "draining", "draining", newScheduler(t, 2), handler)
	startConsumer(t, k)
	<-running

	stopCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := k.StopGracefully(stopCtx)
	close(release)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Truef(t, strings.Contains(err.Error(), "[0]"), "the error %q names no partition [0]", err)
}

// realBrokersEnv names a real Kafka cluster's seed brokers, comma
// separated ("host:9092,host2:9092"). With it set, TestRealCluster creates
// a topic of its own there (the client needs the right to create and delete
// topics), runs a consumer over it and deletes it.
const realBrokersEnv = "AGGFLOW_KAFKA_BROKERS"

func TestRealCluster(t *testing.T) {
	seeds := os.Getenv(realBrokersEnv)
	if seeds == "" {
		t.Skip("no real Kafka cluster: set " + realBrokersEnv + "=host:port[,host:port] to run this test against one")
	}
	const keys, perKey = 100, 20
	brokers := strings.Split(seeds, ",")
	topic := "aggflow-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 4, -1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	defer func() { _, _ = adm.DeleteTopics(context.Background(), topic) }()
	require.NoError(t, cl.ProduceSync(ctx, records(keys, perKey)...).FirstErr())

	j := newJournal(keys * perKey)
	k, err := kafka.NewConsumer("real", kafka.Subscription{Brokers: brokers, Group: topic, Topic: topic},
		accounts, newScheduler(t, 8), codec, j.handle, kafka.WithLogger(quiet))
	require.NoError(t, err)
	startConsumer(t, k)
	j.wait(t, time.Minute)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey))

	offsets, err := adm.FetchOffsets(ctx, topic)
	require.NoError(t, err)
	total := int64(0)
	for _, o := range offsets[topic] {
		total += o.At
	}
	require.Equal(t, int64(keys*perKey), total, "the end of every partition committed")
	_, _ = adm.DeleteGroups(context.Background(), topic)
}
