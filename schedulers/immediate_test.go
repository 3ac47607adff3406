package schedulers_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImmediateRunsOnTheCallersGoroutine(t *testing.T) {
	s := schedulers.Immediate()
	assert.Same(t, s, schedulers.Immediate(), "a singleton")
	assert.Equal(t, "immediate", s.Name())
	var got context.Context
	ran := false
	require.NoError(t, s.Schedule(func(ctx context.Context) { got, ran = ctx, true }))
	assert.True(t, ran, "the task ran before Schedule returned")
	assert.Equal(t, context.Background(), got)
	assert.ErrorIs(t, s.Schedule(nil), schedulers.ErrNilTask)
}

func TestImmediateDisposalIsANoOp(t *testing.T) {
	s := schedulers.Immediate()
	s.Dispose()
	assert.NoError(t, s.DisposeGracefully(context.Background()))
	assert.False(t, s.IsDisposed())
	assert.False(t, testkit.Closed(s.Done()), "never disposed, so never done")
	var ran counter
	assert.NoError(t, s.Schedule(ran.task))
	assert.Equal(t, 1, ran.get())
}

// flux.PublishOn waits for its drain and for the scheduler's Done in one
// select; on Immediate that must leave a goroutine durably blocked inside a
// synctest bubble, or synctest.Wait never returns (the test then hangs until
// go test's -timeout).
func TestImmediateDoneLetsSynctestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := schedulers.Immediate()
		release := make(chan struct{})
		ended := make(chan string, 1)
		require.NoError(t, s.Schedule(func(context.Context) {
			go func() {
				select {
				case <-release:
					ended <- "released"
				case <-s.Done():
					ended <- "terminated"
				}
			}()
		}))
		synctest.Wait()
		assert.Empty(t, ended, "Immediate never terminates")
		close(release)
		assert.Equal(t, "released", <-ended)
		s.Dispose()
		assert.False(t, testkit.Closed(s.Done()), "Dispose does nothing")
	})
}

func TestImmediateWorker(t *testing.T) {
	w, err := schedulers.Immediate().NewWorker()
	require.NoError(t, err)
	var order []int
	for i := range 3 {
		require.NoError(t, w.Schedule(func(context.Context) { order = append(order, i) }))
	}
	assert.Equal(t, []int{0, 1, 2}, order)
	w.Dispose()
	assert.ErrorIs(t, w.Schedule(func(context.Context) { t.Error("ran after Dispose") }), schedulers.ErrRejected)
	other, err := schedulers.Immediate().NewWorker()
	require.NoError(t, err)
	assert.NoError(t, other.Schedule(func(context.Context) {}), "workers are disposed one by one")
}

func TestImmediateRecoversPanics(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)

	assert.NoError(t, schedulers.Immediate().Schedule(func(context.Context) { panic("inline") }))
	assert.Contains(t, buf.String(), "panic=inline")
	assert.Contains(t, buf.String(), "scheduler=immediate")
}
