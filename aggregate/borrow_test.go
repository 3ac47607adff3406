package aggregate_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Wow's BSUP-01: a borrowed view cannot stop the owner; stopping the owner
// stops what the view hands out.
func TestBorrowDoesNotOwn(t *testing.T) {
	owner := newSupplier(t, parallels())
	view := aggregate.Borrow(owner)
	sch := get(t, view, order)
	assert.Same(t, get(t, owner, order), sch)

	assert.NoError(t, view.StopGracefully(context.Background()))
	view.ForceStop()
	assert.False(t, sch.IsDisposed())
	assert.Same(t, sch, get(t, view, order))
	assert.NotSame(t, sch, get(t, view, invoice))

	require.NoError(t, owner.StopGracefully(context.Background()))
	assert.True(t, sch.IsDisposed())
	_, err := view.GetOrInitialize(order)
	assert.ErrorIs(t, err, aggregate.ErrStopped)
}

// Wow's BSUP-02: two children sharing one scheduler through their views stop
// themselves without cutting the owner's graceful disposal short; the owner's
// force stop takes it over.
func TestBorrowedChildrenDuringOwnerGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		owner := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		events, states := aggregate.Borrow(owner), aggregate.Borrow(owner)
		sch := get(t, events, order)
		require.Same(t, sch, get(t, states, order))
		cancelled := make(chan struct{})
		require.NoError(t, sch.Schedule(func(ctx context.Context) {
			<-ctx.Done()
			close(cancelled)
		}))
		graceful := make(chan error, 1)
		go func() { graceful <- owner.StopGracefully(context.Background()) }()
		synctest.Wait()

		events.ForceStop()
		assert.NoError(t, states.StopGracefully(context.Background()))
		synctest.Wait()
		assert.Empty(t, graceful, "a child's stop ended the owner's disposal")
		select {
		case <-cancelled:
			t.Fatal("a child's ForceStop cancelled the owner's task")
		default:
		}

		owner.ForceStop()
		assert.NoError(t, <-graceful)
		<-cancelled
	})
}

func TestBorrowNil(t *testing.T) {
	view := aggregate.Borrow(nil)
	_, err := view.GetOrInitialize(order)
	assert.ErrorIs(t, err, aggregate.ErrNilSupplier)
	assert.NoError(t, view.StopGracefully(context.Background()))
	view.ForceStop()
}
