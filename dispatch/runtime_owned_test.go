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
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// borrower is a fake component that borrows a supplier: its Prepare asks it
// for the scheduler of Order, as a dispatcher's does.
type borrower struct {
	*fakeComponent
	supplier aggregate.SchedulerSupplier
}

func (b *borrower) Prepare(ctx context.Context) error {
	if err := b.fakeComponent.Prepare(ctx); err != nil {
		return err
	}
	_, err := b.supplier.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "Order"})
	return err
}

// events is Wow's CompositeEventDispatcher as a Runtime: two components,
// "domain" and "state" (the event-stream and state-event dispatchers), that
// borrow one fake supplier the Runtime owns, all logging into one callLog.
type events struct {
	log      *callLog
	supplier *fakeSupplier
	children []*fakeComponent
	rt       *component.Runtime
}

func newEvents(t *testing.T) *events {
	t.Helper()
	e := &events{log: &callLog{}}
	e.supplier = &fakeSupplier{log: e.log}
	e.children = []*fakeComponent{newFake("domain", e.log), newFake("state", e.log)}
	rt, err := component.NewRuntime("events", []component.Component{
		&borrower{e.children[0], e.supplier}, &borrower{e.children[1], e.supplier},
	}, component.WithOwned(e.supplier))
	require.NoError(t, err)
	e.rt = rt
	return e
}

// CED-07: every intake closes, the components drain in reverse, then the
// owned supplier stops, once; the components' lookups reach it.
func TestRuntimeStopsOwnedAfterComponents(t *testing.T) {
	e := newEvents(t)
	prepareAndStart(t, e.rt)
	require.NoError(t, e.rt.StopGracefully(t.Context()))
	<-e.rt.Done()
	assert.Equal(t, []string{
		"prepare:domain", "supplier:get:Order", "prepare:state", "supplier:get:Order",
		"start:domain", "start:state",
		"quiesce:domain", "quiesce:state",
		"stop:state", "stop:domain", "supplier:graceful",
	}, e.log.get())
	assert.True(t, testkit.Closed(e.supplier.Done()))
}

// CED-04/05: what fails to build fails before anything is prepared: the
// Runtime is not built, and owns nothing; the supplier stays its
// constructor's.
func TestNewRuntimeInvalidOwnsNothing(t *testing.T) {
	log := &callLog{}
	s := &fakeSupplier{log: log}
	var failedBuild component.Component // a component whose constructor failed
	_, err := component.NewRuntime("events", []component.Component{newFake("domain", log), failedBuild}, component.WithOwned(s))
	require.ErrorIs(t, err, component.ErrInvalidArgument)
	_, err = component.NewRuntime("events", nil, component.WithOwned(s, nil))
	assert.ErrorIs(t, err, component.ErrInvalidOption)
	_, err = component.NewRuntime("events", nil, component.WithOwned(s), component.WithOwned(s))
	assert.ErrorIs(t, err, component.ErrInvalidOption)
	assert.Empty(t, log.get(), "nothing prepared, nothing stopped")
}

// CED-01: a failing first component keeps the second from being prepared;
// the failure forces every component, then the supplier.
func TestRuntimeOwnedPrepareFailure(t *testing.T) {
	e := newEvents(t)
	boom := errors.New("boom")
	e.children[0].prepareErr = boom
	require.ErrorIs(t, e.rt.Prepare(t.Context()), boom)
	<-e.rt.Done()
	assert.Equal(t, []string{"prepare:domain", "force:state", "force:domain", "supplier:force"}, e.log.get())
}

// CED-02: a failing first component keeps the second from being started.
func TestRuntimeOwnedStartFailure(t *testing.T) {
	e := newEvents(t)
	boom := errors.New("boom")
	e.children[0].startErr = boom
	require.NoError(t, e.rt.Prepare(t.Context()))
	require.ErrorIs(t, e.rt.Start(), boom)
	assert.NotContains(t, e.log.get(), "start:state")
	<-e.rt.Done()
}

// CED-06: after a force, a graceful stop does not stop the supplier again,
// nor quiesce anything (Wow: no quiesce after a force).
func TestRuntimeOwnedForceThenGraceful(t *testing.T) {
	e := newEvents(t)
	prepareAndStart(t, e.rt)
	e.rt.ForceStop()
	e.rt.ForceStop()
	require.NoError(t, e.rt.StopGracefully(t.Context()))
	<-e.rt.Done()
	calls := e.log.get()
	assert.Equal(t, []string{"force:state", "force:domain", "supplier:force"}, calls[6:])
	assert.ErrorIs(t, e.rt.Prepare(t.Context()), dispatch.ErrStopped)
}

// CED-08: force does not wait for a component that is still draining, and
// the supplier is forced, not stopped gracefully.
func TestRuntimeOwnedForceDuringGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEvents(t)
		e.children[0].hold = make(chan struct{})
		prepareAndStart(t, e.rt)
		errc := stopping(t, e.rt) // the domain component drains
		e.rt.ForceStop()
		require.NoError(t, <-errc)
		<-e.rt.Done()
		calls := e.log.get()
		assert.Equal(t, "supplier:force", calls[len(calls)-1])
		assert.NotContains(t, calls, "supplier:graceful")
	})
}

// The supplier waits for the components: a second StopGracefully whose ctx
// ends returns its error, and the stop goes on.
func TestRuntimeOwnedWaitsForComponents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEvents(t)
		e.children[0].hold = make(chan struct{})
		prepareAndStart(t, e.rt)
		first := stopping(t, e.rt)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, e.rt.StopGracefully(ctx), context.Canceled)
		assert.NotContains(t, e.log.get(), "supplier:graceful", "the supplier waits for the components")
		close(e.children[0].hold)
		require.NoError(t, <-first)
		assert.Contains(t, e.log.get(), "supplier:graceful")
	})
}

func TestRuntimeOwnedForceBeforePrepare(t *testing.T) {
	e := newEvents(t)
	e.rt.ForceStop()
	<-e.rt.Done()
	assert.Equal(t, []string{"force:state", "force:domain", "supplier:force"}, e.log.get())
	assert.ErrorIs(t, e.rt.Prepare(t.Context()), dispatch.ErrStopped)
	assert.ErrorIs(t, e.rt.Start(), dispatch.ErrStopped)
}

// Quiesce before Prepare begins the stop and sets no deadline: with the
// domain component still draining (only its stop ends it), the Runtime waits
// in StateStopping; StopGracefully then stops everything gracefully, the
// supplier last, and forces nothing. (Were every component to end on
// Quiesce, the Runtime could stop by itself before Quiesce's caller looks at
// its state: TestRuntimeQuiescedBeforePrepareIsDone covers that path.)
func TestRuntimeOwnedQuiesceBeforePrepare(t *testing.T) {
	e := newEvents(t)
	e.children[0].hold = make(chan struct{})
	close(e.children[0].hold)
	e.rt.Quiesce()
	assert.Equal(t, component.StateStopping, e.rt.State())
	require.NoError(t, e.rt.StopGracefully(t.Context()))
	<-e.rt.Done()
	assert.Equal(t, component.StateStopped, e.rt.State())
	assert.Equal(t, "supplier:graceful", e.log.get()[len(e.log.get())-1], "nothing to force")
	assert.NotContains(t, e.log.get(), "supplier:force")
}

// A Runtime is a Component: another Runtime drives it like any other, and
// it stops its supplier once, after its components.
func TestRuntimeInRuntime(t *testing.T) {
	e := newEvents(t)
	e.children[0].hold = make(chan struct{}) // quiesced, domain still drains:
	close(e.children[0].hold)                // only its stop ends it
	other := newFake("other", e.log)
	outer, err := component.NewRuntime("app", []component.Component{e.rt, other})
	require.NoError(t, err)
	prepareAndStart(t, outer)
	require.NoError(t, outer.StopGracefully(t.Context()))
	<-outer.Done()
	assert.True(t, testkit.Closed(e.rt.Done()))
	calls := e.log.get()
	at := func(call string) int { return slices.Index(calls, call) }
	assert.Less(t, at("quiesce:domain"), at("quiesce:state"))
	assert.Less(t, at("quiesce:state"), at("stop:state"))
	assert.Less(t, at("stop:other"), at("stop:state"), "the later component stops first")
	assert.Less(t, at("stop:state"), at("stop:domain"))
	assert.Equal(t, "supplier:graceful", calls[len(calls)-1])
	assert.Equal(t, 1, countOf(calls, "supplier:graceful"))
}

// ForceStop racing Prepare: the component prepared meanwhile is forced
// again, and Prepare reports the stop.
func TestRuntimeOwnedForceDuringPrepare(t *testing.T) {
	e := newEvents(t)
	e.children[0].onPrepare = func(context.Context) { e.rt.ForceStop() }
	require.ErrorIs(t, e.rt.Prepare(t.Context()), dispatch.ErrStopped)
	<-e.rt.Done()
	assert.Equal(t, []string{
		"prepare:domain", "force:state", "force:domain", "supplier:force",
		"supplier:get:Order",
		"force:state", "force:domain", // compensation
	}, e.log.get())
}
