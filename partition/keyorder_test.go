package partition_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
)

// WithKeyOrdering: a retried delivery holds back only its own aggregate's
// next deliveries; an aggregate of the same group goes on at once, as one
// of another group does, and the prefix still waits for the retried
// position.
func TestKeyOrderingRetryBlocksOnlyItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 4
		same, other := idsSharing("a", groups, true), idsSharing("a", groups, false)
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			if x.Position == 1 && x.Attempt < 3 {
				return errRefused
			}
			return nil
		}, partition.WithKeyOrdering(), partition.WithFailurePolicy(partition.FailurePolicy{Retries: 5,
			Backoff: partition.Backoff{Min: time.Second, Max: time.Second}}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i, id := range []string{"a", "a", same, other, same} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		synctest.Wait() // the retried delivery waits for its backoff; everything else that can run has run
		require.Len(t, rec.of(3), 1, "an aggregate of the retried one's group went on")
		require.Len(t, rec.of(5), 1, "and its next delivery too")
		require.Len(t, rec.of(4), 1, "another group went on")
		require.Empty(t, rec.of(2), "the retried aggregate's next delivery waits")
		pos, _ := in.Prefix()
		require.Less(t, pos, int64(1), "the prefix waits for the retried position")
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(5), settled.Prefix, "every position finished")
		require.Len(t, rec.of(1), 3, "two retries, then success")
		require.GreaterOrEqual(t, rec.of(2)[0].at, rec.of(1)[2].at, "after the retried delivery's last attempt")
		require.Zero(t, rec.of(3)[0].at)
	})
}
