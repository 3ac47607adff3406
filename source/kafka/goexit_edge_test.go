package kafka_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// A decoder that ends the poll loop's goroutine with runtime.Goexit (what
// t.FailNow does) stops the consumer with an error, as a poll error would:
// the partitions are released, the client closed, and Done closes.
func TestADecoderGoexitStopsTheConsumer(t *testing.T) {
	c := startCluster(t, "exit", 1)
	require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte("1")},
		&kgo.Record{Key: []byte("a"), Value: []byte("exit")}))
	j := newJournal(1)
	exiting := kafka.Codec[event]{Decode: func(key, value []byte) (event, error) {
		if string(value) == "exit" {
			runtime.Goexit()
		}
		return codec.Decode(key, value)
	}, ID: codec.ID}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), exiting, j.handle, kafka.WithLogger(quiet))
	require.NoError(t, err)
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the consumer did not stop after its decoder's Goexit")
	}
	require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
	var pe *kafka.PanicError
	require.ErrorAs(t, k.Err(), &pe)
	j.wait(t, time.Second) // the record before was handled
}
