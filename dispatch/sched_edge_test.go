package dispatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/schedulers"
)

// docs/lifecycle.md, rule 7: a task's context is done once its scheduler
// terminated, after a graceful disposal too.
func TestTaskContextDoneAfterGracefulDisposal(t *testing.T) {
	s, err := schedulers.NewParallel("edge", 1)
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	require.NoError(t, s.Schedule(func(ctx context.Context) { got <- ctx }))
	ctx := <-got
	require.NoError(t, s.DisposeGracefully(context.Background()))
	<-s.Done()
	require.Error(t, ctx.Err(), "the task context is not done although the scheduler terminated")
}
