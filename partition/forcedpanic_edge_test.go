package partition_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// A handler that a force cancels midway and that then panics (a "must" on
// the context's error) or calls runtime.Goexit did not finish its work: its
// position must block the prefix like a cancelled one, so that the next
// owner gets it again. It used to count as finished (OutcomePanic finishes a
// position) and the prefix passed it.
func TestForcedPanicDoesNotFinishItsPosition(t *testing.T) {
	for name, fail := range map[string]func(error){
		"panic":  func(err error) { panic(err) },
		"goexit": func(error) { runtime.Goexit() },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				quiet := slog.New(slog.DiscardHandler)
				sched, err := schedulers.NewParallel("accounts", 2, schedulers.WithLogger(quiet))
				require.NoError(t, err)
				defer func() { sched.Dispose(); <-sched.Done() }()
				d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
					func(ctx context.Context, x partition.Delivery[op]) error {
						if x.Position == 2 {
							<-ctx.Done()
							fail(ctx.Err())
						}
						return nil
					}, partition.WithGroups(4), partition.WithLogger(quiet))
				require.NoError(t, err)
				in, err := d.Assign(t.Context(), 0, 1)
				require.NoError(t, err)
				require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
				require.NoError(t, in.Deliver(t.Context(), op{"b", 0}, 2, 1))
				require.NoError(t, in.Deliver(t.Context(), op{"c", 0}, 3, 1))
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				defer cancel()
				settled, err := d.Revoke(ctx, 0)
				require.NoError(t, err)
				require.True(t, settled.Forced)
				require.True(t, settled.OK)
				require.Equal(t, int64(1), settled.Prefix, "the prefix stops below the forced position")
				blocked, ok := in.Tracker().Blocked()
				require.True(t, ok)
				require.Equal(t, int64(2), blocked)
			})
		})
	}
}
