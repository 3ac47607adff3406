package aggregate_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a factory that blocks in its creation of one scheduler name until
// released, and creates fakes.
type gate struct {
	name     string
	entered  chan struct{}
	release  chan struct{}
	made     *fakeScheduler
	failWith error
}

func newGate(name string) *gate {
	return &gate{name: name, entered: make(chan struct{}), release: make(chan struct{}), made: newFake(name)}
}

func (g *gate) factory(name string, _ int) (schedulers.Scheduler, error) {
	if name != g.name {
		return newFake(name), nil
	}
	close(g.entered)
	<-g.release
	if g.failWith != nil {
		return nil, g.failWith
	}
	return g.made, nil
}

// creating returns a supplier whose factory blocks in the creation of
// "worker-Order", which a GetOrInitialize of order has entered; creator
// receives that call's error.
func creating(t *testing.T, failWith error) (g *gate, s *aggregate.Supplier, creator <-chan error) {
	t.Helper()
	g = newGate("worker-Order")
	g.failWith = failWith
	s, err := aggregate.NewSchedulerSupplier("worker", aggregate.WithSchedulerFactory(g.factory))
	require.NoError(t, err)
	creator = getAsync(s, order)
	<-g.entered
	return g, s, creator
}

// getAsync calls GetOrInitialize on a goroutine of its own.
func getAsync(s *aggregate.Supplier, n aggregate.NamedAggregate) <-chan error {
	got := make(chan error, 1)
	go func() {
		_, err := s.GetOrInitialize(n)
		got <- err
	}()
	return got
}

// The factory runs outside the supplier's lock: ForceStop returns while it
// blocks, a caller waiting for the same creation gets ErrStopped at once,
// and the creator gets it when the factory returns, with what it made
// disposed. Done waits for the factory.
func TestForceStopDuringCreationReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		waiter := getAsync(s, order)
		synctest.Wait() // the waiter waits for the creation

		s.ForceStop()
		assert.ErrorIs(t, <-waiter, aggregate.ErrStopped)
		synctest.Wait()
		assert.False(t, isClosed(s.Done()), "Done closed while the factory runs")

		close(g.release)
		assert.ErrorIs(t, <-creator, aggregate.ErrStopped)
		<-s.Done()
		assert.True(t, g.made.forced.Load(), "what the factory made after the stop is disposed")
		assert.NoError(t, s.Err())
	})
}

func TestGracefulStopDuringCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, s.StopGracefully(ctx), context.DeadlineExceeded, "the stop waits for the factory")
		close(g.release)
		assert.ErrorIs(t, <-creator, aggregate.ErrStopped)
		assert.NoError(t, s.StopGracefully(context.Background()))
		assert.True(t, g.made.IsDisposed())
	})
}

// Callers for one named aggregate wait for the creation in progress, on a
// channel; callers for another one are served meanwhile.
func TestCreationDoesNotBlockOtherAggregates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, nil)
		waiter := make(chan schedulers.Scheduler, 1)
		go func() {
			sch, _ := s.GetOrInitialize(order)
			waiter <- sch
		}()
		_, err := s.GetOrInitialize(invoice)
		assert.NoError(t, err)
		synctest.Wait()
		assert.Empty(t, waiter)
		close(g.release)
		assert.NoError(t, <-creator)
		assert.Same(t, g.made, <-waiter, "one creation, shared")
		s.ForceStop()
		<-s.Done()
	})
}

// A failed creation is reported to its waiters too, and the next call tries
// again.
func TestFailedCreationIsSharedThenRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, s, creator := creating(t, errBoom)
		waiter := getAsync(s, order)
		synctest.Wait()
		close(g.release)
		assert.ErrorIs(t, <-creator, errBoom)
		assert.ErrorIs(t, <-waiter, errBoom)
		g.entered, g.failWith = make(chan struct{}), nil
		assert.Same(t, g.made, get(t, s, order))
		g.made.finish()
		require.NoError(t, s.StopGracefully(context.Background()))
	})
}

// The supplier's logger reaches the schedulers the default factory creates.
func TestDefaultFactoryLogsThroughSupplierLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		s, err := aggregate.NewSchedulerSupplier("worker", aggregate.WithParallelism(1),
			aggregate.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		require.NoError(t, err)
		require.NoError(t, get(t, s, order).Schedule(func(context.Context) { panic("kaput") }))
		require.NoError(t, s.StopGracefully(context.Background()))
		assert.Contains(t, logs.String(), "kaput")
		assert.Contains(t, logs.String(), "worker-Order")
	})
}

// Done closes only after a stop, once every scheduler's goroutines exited:
// after a force, that waits for a task that ignores its context.
func TestSupplierDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSupplier(t, parallels(), aggregate.WithParallelism(1))
		release := make(chan struct{})
		require.NoError(t, get(t, s, order).Schedule(func(context.Context) { <-release }))
		synctest.Wait()
		assert.False(t, isClosed(s.Done()), "no stop yet")
		assert.Equal(t, "worker", s.Name())
		s.ForceStop()
		synctest.Wait()
		assert.False(t, isClosed(s.Done()), "a task still runs")
		close(release)
		<-s.Done()
		assert.NoError(t, s.Err())
	})
	empty := newSupplier(t, fakes())
	require.NoError(t, empty.StopGracefully(context.Background()))
	assert.True(t, isClosed(empty.Done()))
}

// A borrower sees only GetOrInitialize: it cannot stop what it was lent.
// Stopping the owner stops what the borrowers were handed (Wow's BSUP-01).
func TestLentSupplierCannotStop(t *testing.T) {
	owner := newSupplier(t, parallels())
	var events, states aggregate.SchedulerSupplier = owner, owner
	sch := get(t, events, order)
	assert.Same(t, sch, get(t, states, order))
	_, canStop := events.(interface{ ForceStop() })
	assert.True(t, canStop, "the dynamic type is the owner's")
	require.NoError(t, owner.StopGracefully(context.Background()))
	assert.True(t, sch.IsDisposed())
	_, err := states.GetOrInitialize(order)
	assert.ErrorIs(t, err, aggregate.ErrStopped)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
