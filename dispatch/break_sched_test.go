package dispatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
)

// docs/lifecycle.md, rule 7: "Contexts end with their owner: ... a task's
// context once its scheduler terminated, either way", and the schedulers
// table: "last goroutine exits after a stop | Done() closes; task contexts
// are done". After DisposeGracefully the task context is never cancelled:
// only Dispose cancels it, so work a task handed its ctx to outlives the
// scheduler.
func TestBreakTaskContextDoneAfterGracefulDisposal(t *testing.T) {
	s, err := schedulers.NewParallel("brk", 1)
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	require.NoError(t, s.Schedule(func(ctx context.Context) { got <- ctx }))
	ctx := <-got
	require.NoError(t, s.DisposeGracefully(context.Background()))
	<-s.Done()
	require.Error(t, ctx.Err(), "the task context is not done although the scheduler terminated")
}
