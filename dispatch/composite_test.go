package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
)

// compositeFixture is a Composite over two fake children, "domain" and
// "state" (Wow's event-stream and state-event dispatchers), and a fake
// supplier, all logging into one callLog.
type compositeFixture struct {
	log       *callLog
	supplier  *fakeSupplier
	children  []*fakeComponent
	borrowed  []aggregate.SchedulerSupplier // what each child was given
	composite *dispatch.Composite
}

func newCompositeFixture(t *testing.T, buildErr error) *compositeFixture {
	t.Helper()
	f := &compositeFixture{log: &callLog{}}
	f.supplier = &fakeSupplier{log: f.log}
	f.children = []*fakeComponent{newFake("domain", f.log), newFake("state", f.log)}
	factories := make([]dispatch.ChildFactory, len(f.children))
	for i, child := range f.children {
		factories[i] = func(s aggregate.SchedulerSupplier) (dispatch.Component, error) {
			f.log.add("build:" + child.name)
			f.borrowed = append(f.borrowed, s)
			if i == 1 && buildErr != nil {
				return nil, buildErr
			}
			return child, nil
		}
	}
	c, err := dispatch.NewComposite("events", f.supplier, factories...)
	require.NoError(t, err)
	f.composite = c
	return f
}

func TestCompositeOrder(t *testing.T) {
	f := newCompositeFixture(t, nil)
	c := f.composite
	assert.Equal(t, "events", c.Name())
	require.NoError(t, c.Prepare(t.Context()))
	assert.Equal(t, dispatch.StatePrepared, c.State())
	require.NoError(t, c.Start())
	assert.Equal(t, dispatch.StateRunning, c.State())
	require.NoError(t, c.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.StateStopped, c.State())
	// CED-07: every intake closes, children drain in reverse, then the
	// shared supplier stops, once.
	assert.Equal(t, []string{
		"build:domain", "build:state", "prepare:domain", "prepare:state",
		"start:domain", "start:state",
		"quiesce:domain", "quiesce:state",
		"stop:state", "stop:domain", "supplier:graceful",
	}, f.log.get())
}

func TestCompositeChildrenBorrowTheSupplier(t *testing.T) {
	f := newCompositeFixture(t, nil)
	require.NoError(t, f.composite.Prepare(t.Context()))
	require.Len(t, f.borrowed, 2)
	for _, s := range f.borrowed {
		_, err := s.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "Order"})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"supplier:get:Order", "supplier:get:Order"}, f.log.get()[4:],
		"lookups reach the owner")
	f.composite.ForceStop()
}

// CED-04/05: a child that cannot be built aborts before any is prepared.
func TestCompositeBuildFailurePreparesNothing(t *testing.T) {
	boom := errors.New("boom")
	f := newCompositeFixture(t, boom)
	require.ErrorIs(t, f.composite.Prepare(t.Context()), boom)
	f.composite.ForceStop()
	<-f.composite.Done()
	assert.Equal(t, []string{"build:domain", "build:state", "supplier:force", "supplier:graceful"}, f.log.get())
}

// CED-01: a failing first child keeps the second from being prepared.
func TestCompositePrepareFailureStopsTheSequence(t *testing.T) {
	f := newCompositeFixture(t, nil)
	boom := errors.New("boom")
	f.children[0].prepareErr = boom
	require.ErrorIs(t, f.composite.Prepare(t.Context()), boom)
	f.composite.ForceStop()
	<-f.composite.Done() // its wait for the supplier is the last call
	assert.Equal(t, []string{
		"build:domain", "build:state", "prepare:domain",
		"force:state", "force:domain", "supplier:force", "supplier:graceful",
	}, f.log.get())
}

// CED-02: a failing first child keeps the second from being started.
func TestCompositeStartFailureStopsTheSequence(t *testing.T) {
	f := newCompositeFixture(t, nil)
	boom := errors.New("boom")
	f.children[0].startErr = boom
	require.NoError(t, f.composite.Prepare(t.Context()))
	require.ErrorIs(t, f.composite.Start(), boom)
	assert.NotContains(t, f.log.get(), "start:state")
	f.composite.ForceStop()
}

// CED-06: after a force, a graceful stop does not stop the supplier again.
func TestCompositeForceThenGraceful(t *testing.T) {
	f := newCompositeFixture(t, nil)
	require.NoError(t, f.composite.Prepare(t.Context()))
	require.NoError(t, f.composite.Start())
	f.composite.ForceStop()
	f.composite.ForceStop()
	require.NoError(t, f.composite.StopGracefully(t.Context()))
	<-f.composite.Done()
	calls := f.log.get()
	assert.Equal(t, []string{"force:state", "force:domain", "supplier:force"}, calls[6:9])
	assert.Equal(t, 1, countOf(calls, "supplier:graceful"), "only Done's wait for the forced supplier")
	assert.NotContains(t, calls, "quiesce:domain", "Wow: no quiesce after a force")
	assert.ErrorIs(t, f.composite.Prepare(t.Context()), dispatch.ErrStopped)
}

// CED-08: force does not wait for a child that is still draining.
func TestCompositeForceDuringGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newCompositeFixture(t, nil)
		f.children[0].hold = make(chan struct{})
		require.NoError(t, f.composite.Prepare(t.Context()))
		require.NoError(t, f.composite.Start())
		errc := make(chan error, 1)
		go func() { errc <- f.composite.StopGracefully(t.Context()) }()
		synctest.Wait() // the domain child drains
		f.composite.ForceStop()
		require.NoError(t, <-errc)
		<-f.composite.Done()
		log := f.log.get()
		// Done waits for the forced supplier with its StopGracefully, which
		// then only waits; the force came first.
		assert.Equal(t, []string{"supplier:force", "supplier:graceful"}, log[len(log)-2:])
	})
}

func TestCompositeGracefulResumesAfterContext(t *testing.T) {
	f := newCompositeFixture(t, nil)
	f.children[0].hold = make(chan struct{})
	require.NoError(t, f.composite.Prepare(t.Context()))
	require.NoError(t, f.composite.Start())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, f.composite.StopGracefully(ctx), context.Canceled)
	assert.NotContains(t, f.log.get(), "supplier:graceful", "the supplier waits for the children")
	close(f.children[0].hold)
	require.NoError(t, f.composite.StopGracefully(t.Context()))
	assert.Contains(t, f.log.get(), "supplier:graceful")
}

func TestCompositeForceBeforePrepare(t *testing.T) {
	f := newCompositeFixture(t, nil)
	f.composite.ForceStop()
	<-f.composite.Done() // Done waits for the supplier through its graceful stop
	assert.Equal(t, []string{"supplier:force", "supplier:graceful"}, f.log.get())
	assert.ErrorIs(t, f.composite.Prepare(t.Context()), dispatch.ErrStopped)
	assert.NoError(t, f.composite.Start(), "a no-op once stopped")
}

func TestCompositeIllegalTransitions(t *testing.T) {
	f := newCompositeFixture(t, nil)
	assert.ErrorIs(t, f.composite.Start(), dispatch.ErrIllegalState)
	require.NoError(t, f.composite.Prepare(t.Context()))
	err := f.composite.Prepare(t.Context())
	assert.ErrorIs(t, err, dispatch.ErrIllegalState)
	assert.ErrorContains(t, err, `composite "events" cannot prepare from state PREPARED`)
	f.composite.Quiesce()
	assert.Equal(t, dispatch.StateStopping, f.composite.State())
	assert.ErrorIs(t, f.composite.Start(), dispatch.ErrIllegalState)
	f.composite.ForceStop()
}

func TestCompositeQuiesceBeforePrepare(t *testing.T) {
	f := newCompositeFixture(t, nil)
	f.composite.Quiesce()
	assert.Equal(t, dispatch.StateStopped, f.composite.State())
	require.NoError(t, f.composite.StopGracefully(t.Context()))
	<-f.composite.Done()
	assert.NotEmpty(t, f.log.get())
	assert.Subset(t, []string{"supplier:graceful"}, f.log.get(), "nothing to force")
}

func TestNewCompositeInvalid(t *testing.T) {
	s := &fakeSupplier{log: &callLog{}}
	_, err := dispatch.NewComposite("", s)
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument)
	_, err = dispatch.NewComposite("x", nil)
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument)
	_, err = dispatch.NewComposite("x", s, nil)
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument)
}

// A Composite is a Component: a Runtime drives it like any other.
func TestCompositeInRuntime(t *testing.T) {
	f := newCompositeFixture(t, nil)
	other := newFake("other", f.log)
	rt, err := dispatch.NewRuntime([]dispatch.Component{f.composite, other})
	require.NoError(t, err)
	require.NoError(t, rt.Start(t.Context()))
	require.NoError(t, rt.StopGracefully(t.Context()))
	<-rt.Done()
	calls := f.log.get()
	// The supplier is stopped once, after the children stopped; Done does
	// not need to wait for it again.
	assert.Equal(t, []string{"stop:other", "quiesce:domain", "quiesce:state", "stop:state", "stop:domain", "supplier:graceful"},
		calls[len(calls)-6:])
}

// ForceStop racing Prepare: the child prepared meanwhile is forced again,
// and Prepare reports the stop.
func TestCompositeForceDuringPrepare(t *testing.T) {
	f := newCompositeFixture(t, nil)
	f.children[0].onPrepare = f.composite.ForceStop
	require.ErrorIs(t, f.composite.Prepare(t.Context()), dispatch.ErrStopped)
	<-f.composite.Done()
	calls := f.log.get()
	assert.Equal(t, 1, countOf(calls, "supplier:graceful"), "Done's wait, at any time after the force")
	assert.Equal(t, []string{
		"build:domain", "build:state", "prepare:domain",
		"force:state", "force:domain", "supplier:force",
		"force:state", "force:domain", // compensation
	}, slices.DeleteFunc(calls, func(c string) bool { return c == "supplier:graceful" }))
	assert.NotContains(t, f.log.get(), "prepare:state")
}

// countOf returns how many times call occurs in calls.
func countOf(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}
