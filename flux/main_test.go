package flux_test

import (
	"context"
	"testing"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// leakFree checks, at the end of the test and after the schedulers made by
// newParallel afterwards were disposed, that no goroutine is left over.
func leakFree(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// newParallel returns a parallel scheduler disposed gracefully at the end of
// the test (a task that never ends fails the disposal after 10 s).
func newParallel(t testing.TB, n int) schedulers.Scheduler {
	s, err := schedulers.NewParallel(t.Name(), n)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.DisposeGracefully(ctx))
	})
	return s
}
