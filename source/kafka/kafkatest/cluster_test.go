package kafkatest_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A fake cluster for tests: start, create a topic, produce, close.
func ExampleStart() {
	c, err := kafkatest.Start(kafkatest.WithTopic("orders", 3))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.CreateTopic(ctx, "orders.dead", 1); err != nil {
		panic(err)
	}
	r := &kgo.Record{Key: []byte("order-1"), Value: []byte("placed")}
	if err := c.Produce(ctx, "orders", r); err != nil {
		panic(err)
	}
	fmt.Println(len(c.Addrs()), "broker; record at offset", r.Offset, "of topic", r.Topic)
	// Output:
	// 1 broker; record at offset 0 of topic orders
}

func TestStartRefusesInvalidArguments(t *testing.T) {
	_, err := kafkatest.Start(kafkatest.WithBrokers(0))
	require.ErrorIs(t, err, kafkatest.ErrInvalidArgument)
	_, err = kafkatest.Start(kafkatest.WithTopic("t", 0))
	require.ErrorIs(t, err, kafkatest.ErrInvalidArgument)
	c, err := kafkatest.Start()
	require.NoError(t, err)
	defer c.Close()
	require.ErrorIs(t, c.CreateTopic(context.Background(), "", 1), kafkatest.ErrInvalidArgument)
}

// Close ends the listeners and the connections; a second Close does
// nothing; nothing of the cluster outlives it (goleak).
func TestCloseEndsTheCluster(t *testing.T) {
	c, err := kafkatest.Start(kafkatest.WithBrokers(2), kafkatest.WithTopic("t", 2))
	require.NoError(t, err)
	addrs := c.Addrs()
	require.Len(t, addrs, 2)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "t", &kgo.Record{Key: []byte("k"), Value: []byte("v")}))
	_, err = c.Committed(ctx, "nobody", "t")
	require.Error(t, err, "a group that never committed")
	c.Close()
	c.Close()
	for _, a := range addrs {
		_, err := net.DialTimeout("tcp", a, time.Second)
		require.Error(t, err, "%s still accepts connections", a)
	}
}
