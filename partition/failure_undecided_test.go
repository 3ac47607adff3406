package partition_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
)

// A delivery that fails without the policy deciding about it (the id
// function panicked, so no handler ran; or its own ctx, from
// WithContextOf, ended without a force, so the retries could not go on)
// is not settled behind a policy that dead-letters or stops: it stops the
// consumer and its position is not finished, as a Goexit's.
func TestFailureUndecidedStops(t *testing.T) {
	for _, c := range []struct {
		name string
		idOf func(op) string
		opts []partition.Option
	}{
		{name: "id function panics", idOf: func(x op) string {
			if x.seq == 1 {
				panic("no id")
			}
			return x.id
		}},
		{name: "own ctx ended", idOf: func(x op) string { return x.id },
			opts: []partition.Option{partition.WithDispatchOptions(dispatch.WithContextOf(
				func(ctx context.Context, x partition.Delivery[op]) context.Context {
					if x.Exchange.seq != 1 {
						return ctx
					}
					ctx, cancel := context.WithCancel(ctx)
					cancel() // a deadline of its own, passed
					return ctx
				}))}},
	} {
		for _, then := range []partition.Final{partition.Stop(), partition.DeadLetter("dlq")} {
			t.Run(c.name+", "+then.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var stops []error
					letters := 0
					opts := append([]partition.Option{partition.WithGroups(4), partition.WithLogger(slog.New(slog.DiscardHandler)),
						partition.WithFailurePolicy(partition.FailurePolicy{Retries: 2, Then: then}),
						partition.WithFailureActions(partition.FailureActions{
							DeadLetter: func(context.Context, partition.Letter) error {
								mu.Lock()
								letters++
								mu.Unlock()
								return nil
							},
							Stop: func(err error) {
								mu.Lock()
								stops = append(stops, err)
								mu.Unlock()
							}})}, c.opts...)
					d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 4), c.idOf,
						func(ctx context.Context, _ partition.Delivery[op]) error { return ctx.Err() }, opts...)
					require.NoError(t, err)
					in, err := d.Assign(t.Context(), 0, 1)
					require.NoError(t, err)
					for i := range 3 {
						require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
					}
					settled, err := d.Revoke(t.Context(), 0)
					require.NoError(t, err)
					require.Equal(t, int64(1), settled.Prefix, "position 2 is not acknowledged past")
					require.Len(t, stops, 1)
					require.ErrorIs(t, stops[0], partition.ErrHandlerFailed)
					require.ErrorContains(t, stops[0], "partition 0, position 2")
					require.Zero(t, letters)
					require.Equal(t, partition.FailureStats{Stopped: 1}, d.Failures())
				})
			})
		}
	}
}
