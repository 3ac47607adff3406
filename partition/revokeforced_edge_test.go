package partition_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
)

// A partition with nothing in flight, revoked under a ctx that has ended
// already (a rebalance callback past its deadline), needs no force: Settled
// says so. It used to report Forced whenever the ctx had ended, because the
// dispatcher's goroutines had not exited yet when StopGracefully looked.
func TestRevokeOfAnIdlePartitionIsNotForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched := newParallel(t, 2)
		d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			func(context.Context, partition.Delivery[op]) error { return nil })
		require.NoError(t, err)
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		synctest.Wait() // handled: nothing in flight
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		settled, err := d.Revoke(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, partition.Settled{Partition: 0, Prefix: 1, OK: true,
			Stats: dispatch.Stats{Received: 1, Succeeded: 1}}, settled)
	})
}
