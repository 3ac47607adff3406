package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/kafka"
)

// An id function that panics on a record fails it before any handler: a
// policy that stops does not let it be committed past, nor settled; the
// consumer fails and commits what came before it.
func TestFailureStopIDPanics(t *testing.T) {
	c := startCluster(t, "orders", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Produce(ctx, "orders", records(3, 3)...))
	bad := codec
	bad.ID = func(e event) string {
		if e.ID == "acct-1" && e.Seq == 2 { // offset 4
			panic("no id")
		}
		return e.ID
	}
	k, err := kafka.NewConsumer("test", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "orders"},
		accounts, newScheduler(t, 4), bad, func(context.Context, partition.Delivery[event]) error { return nil },
		kafka.WithLogger(quiet), kafka.WithFailurePolicy(partition.FailurePolicy{Then: partition.Stop()}))
	require.NoError(t, err)
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-ctx.Done():
		k.ForceStop()
		<-k.Done()
		t.Fatalf("the consumer did not stop: committed %d, Failures %+v", committedAt(c, "g", "orders"), k.Stats().Failures)
	}
	require.ErrorIs(t, k.Err(), partition.ErrHandlerFailed)
	require.Equal(t, int64(4), committedAt(c, "g", "orders"), "committed up to the record")
	require.Equal(t, partition.FailureStats{Stopped: 1}, k.Stats().Failures)
}
