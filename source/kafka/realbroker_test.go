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

	"github.com/aggflow/aggflow/source/kafka"
)

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
