package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

func newRuntime(t *testing.T, cs []*fakeComponent, opts ...component.RuntimeOption) *component.Runtime {
	t.Helper()
	components := make([]component.Component, len(cs))
	for i, c := range cs {
		components[i] = c
	}
	rt, err := component.NewRuntime("app", components, opts...)
	require.NoError(t, err)
	return rt
}

// stopping calls rt.StopGracefully on a goroutine of its own, and returns
// once that call waits (in a synctest bubble).
func stopping(t *testing.T, rt *component.Runtime) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- rt.StopGracefully(t.Context()) }()
	synctest.Wait()
	return errc
}

func threeFakes(log *callLog) []*fakeComponent {
	return []*fakeComponent{newFake("a", log), newFake("b", log), newFake("c", log)}
}

// prepareAndStart prepares and starts rt.
func prepareAndStart(t *testing.T, rt *component.Runtime) {
	t.Helper()
	require.NoError(t, rt.Prepare(t.Context()))
	require.NoError(t, rt.Start())
}

func TestRuntimeOrder(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	assert.Equal(t, "app", rt.Name())
	require.NoError(t, rt.Prepare(t.Context()))
	assert.Equal(t, component.StatePrepared, rt.State())
	require.NoError(t, rt.Start())
	assert.Equal(t, component.StateRunning, rt.State())
	require.NoError(t, rt.StopGracefully(t.Context()))
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "prepare:c", // readiness barrier
		"start:a", "start:b", "start:c",
		"quiesce:a", "quiesce:b", "quiesce:c",
		"stop:c", "stop:b", "stop:a",
	}, log.get())
	<-rt.Done()
	assert.Equal(t, component.StateStopped, rt.State())
	assert.NoError(t, rt.Err())
	assert.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped, "one-shot")
	assert.ErrorIs(t, rt.Start(), dispatch.ErrStopped, "one-shot")
	assert.NoError(t, rt.StopGracefully(t.Context()), "a later stop observes the same result")
}

func TestRuntimeInvalidArguments(t *testing.T) {
	a := newFake("a", &callLog{})
	_, err := component.NewRuntime("app", []component.Component{a, nil})
	assert.ErrorIs(t, err, component.ErrInvalidArgument)
	_, err = component.NewRuntime("app", []component.Component{a, a})
	assert.ErrorIs(t, err, component.ErrInvalidArgument)
	_, err = component.NewRuntime("", []component.Component{a})
	assert.ErrorIs(t, err, component.ErrInvalidArgument)
	_, err = component.NewRuntime("app", []component.Component{a}, component.WithShutdownTimeout(0))
	assert.ErrorIs(t, err, component.ErrInvalidOption)
	assert.ErrorContains(t, err, `runtime "app"`)
}

func TestRuntimePrepareFailureForcesAllInReverse(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	boom := errors.New("boom")
	cs[1].prepareErr = boom
	rt := newRuntime(t, cs)
	err := rt.Prepare(t.Context())
	require.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, `component: runtime "app": component "b" failed to prepare: boom`)
	assert.Equal(t, []string{"prepare:a", "prepare:b", "force:c", "force:b", "force:a"}, log.get(),
		"c, never prepared, is stopped too")
	<-rt.Done()
	assert.ErrorIs(t, rt.Err(), boom)
	assert.ErrorIs(t, rt.Start(), dispatch.ErrStopped)
}

func TestRuntimeStartFailureForcesAllInReverse(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	boom := errors.New("boom")
	cs[1].startErr = boom
	rt := newRuntime(t, cs)
	require.NoError(t, rt.Prepare(t.Context()))
	require.ErrorIs(t, rt.Start(), boom)
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "prepare:c", "start:a", "start:b",
		"force:c", "force:b", "force:a",
	}, log.get())
	<-rt.Done()
}

func TestRuntimeIllegalTransitions(t *testing.T) {
	rt := newRuntime(t, threeFakes(&callLog{}))
	assert.ErrorIs(t, rt.Start(), dispatch.ErrIllegalState, "Start before Prepare")
	require.NoError(t, rt.Prepare(t.Context()))
	err := rt.Prepare(t.Context())
	assert.ErrorIs(t, err, dispatch.ErrIllegalState)
	assert.ErrorContains(t, err, `runtime "app" cannot prepare from state PREPARED`)
	require.NoError(t, rt.Start())
	assert.ErrorIs(t, rt.Start(), dispatch.ErrIllegalState, "Start twice")
	rt.ForceStop()
	<-rt.Done()
}

func TestRuntimeStopBeforePrepare(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	require.NoError(t, rt.StopGracefully(t.Context()))
	<-rt.Done()
	assert.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped)
	assert.Equal(t, []string{"quiesce:a", "quiesce:b", "quiesce:c", "stop:c", "stop:b", "stop:a"}, log.get(),
		"quiescing a component never prepared stops it: its stop returns at once")
}

func TestRuntimeForceStopBeforePrepare(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	rt.ForceStop()
	rt.ForceStop()
	<-rt.Done()
	assert.Equal(t, []string{"force:c", "force:b", "force:a"}, log.get(), "force covers every component, once")
	assert.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped)
	assert.NoError(t, rt.StopGracefully(t.Context()))
}

func TestRuntimeDeadlineForcesInReverse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[1].hold = make(chan struct{}) // b never drains by itself
		rt := newRuntime(t, cs, component.WithShutdownTimeout(5*time.Second))
		prepareAndStart(t, rt)
		start := time.Now()
		err := rt.StopGracefully(t.Context())
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.EqualError(t, err, `component: shutdown timed out: runtime "app" after 5s; still running: "b"`)
		assert.Equal(t, 5*time.Second, time.Since(start), "one deadline for the whole stop")
		assert.Equal(t, []string{
			"prepare:a", "prepare:b", "prepare:c", "start:a", "start:b", "start:c",
			"quiesce:a", "quiesce:b", "quiesce:c", "stop:c", "stop:b",
			"force:c", "force:b", "force:a",
		}, log.get())
		<-rt.Done()
		assert.ErrorIs(t, rt.StopGracefully(t.Context()), dispatch.ErrShutdownTimeout, "the result is kept")
		assert.ErrorIs(t, rt.Err(), dispatch.ErrShutdownTimeout)
	})
}

func TestRuntimeCallerContextEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[0].hold = make(chan struct{})
		rt := newRuntime(t, cs)
		prepareAndStart(t, rt)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := rt.StopGracefully(ctx)
		assert.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, `still running: "a"`)
		assert.Contains(t, log.get(), "force:a")
		<-rt.Done()
	})
}

func TestRuntimeForceDuringGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[2].hold = make(chan struct{})
		rt := newRuntime(t, cs)
		prepareAndStart(t, rt)
		first, second := stopping(t, rt), stopping(t, rt) // both callers wait; c holds
		rt.ForceStop()
		assert.NoError(t, <-first)
		assert.NoError(t, <-second)
		<-rt.Done()
		calls := log.get()
		assert.Equal(t, []string{"force:c", "force:b", "force:a"}, calls[len(calls)-3:])
		assert.NotContains(t, calls, "stop:b", "no graceful stop begins after the force")
	})
}

func TestRuntimeStopErrorsJoined(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	e1, e2 := errors.New("e1"), errors.New("e2")
	cs[0].stopErr, cs[2].stopErr = e1, e2
	rt := newRuntime(t, cs)
	prepareAndStart(t, rt)
	err := rt.StopGracefully(t.Context())
	assert.ErrorIs(t, err, e1)
	assert.ErrorIs(t, err, e2)
	assert.NotErrorIs(t, err, dispatch.ErrShutdownTimeout)
	calls := log.get()
	assert.Contains(t, calls, "stop:a", "a failing component does not stop the sequence")
	assert.Equal(t, []string{"force:c", "force:b", "force:a"}, calls[len(calls)-3:], "a failed graceful pass is followed by a force pass")
	<-rt.Done()
	assert.Equal(t, err, rt.Err(), "nothing else failed")
}

// Err joins each component's own error, once.
func TestRuntimeErrJoinsComponentErrors(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	e1 := errors.New("e1")
	cs[1].err, cs[1].stopErr = e1, e1 // as a Dispatcher's StopGracefully returns its Err
	cs[2].err = errors.New("e2")
	rt := newRuntime(t, cs)
	prepareAndStart(t, rt)
	assert.ErrorIs(t, rt.StopGracefully(t.Context()), e1)
	<-rt.Done()
	assert.ErrorIs(t, rt.Err(), e1)
	assert.ErrorIs(t, rt.Err(), cs[2].err)
	assert.Equal(t, 1, strings.Count(rt.Err().Error(), "e1"), "b's Err was reported by its stop, once: %v", rt.Err())
	assert.Contains(t, rt.Err().Error(), `component: runtime "app": component "c": e2`)
}

func TestRuntimeForceDuringPrepare(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	var rt *component.Runtime
	cs[1].onPrepare = func(context.Context) { rt.ForceStop() }
	rt = newRuntime(t, cs)
	err := rt.Prepare(t.Context())
	require.ErrorIs(t, err, dispatch.ErrStopped)
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "force:c", "force:b", "force:a",
		"force:c", "force:b", "force:a", // compensation after the racing Prepare
	}, log.get())
	<-rt.Done()
}

func TestRuntimeGracefulDuringPrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		var rt *component.Runtime
		errc := make(chan error, 1)
		cs[1].onPrepare = func(context.Context) {
			go func() { errc <- rt.StopGracefully(t.Context()) }()
			synctest.Wait() // the stop waits for Prepare to return
		}
		rt = newRuntime(t, cs)
		require.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped)
		require.NoError(t, <-errc)
		assert.Equal(t, []string{
			"prepare:a", "prepare:b",
			"quiesce:a", "quiesce:b", "quiesce:c", "stop:c", "stop:b", "stop:a", // c was never prepared
		}, log.get())
		<-rt.Done()
	})
}

func TestRuntimeGracefulDuringPrepareStopsUnpreparedDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newFake("a", &callLog{})
		d, err := dispatch.New("orders", orders, flux.FromSlice(exchanges(3, 1)),
			func(context.Context, testkit.Exchange) error { return nil }, quiet)
		require.NoError(t, err)
		var rt *component.Runtime
		errc := make(chan error, 1)
		first.onPrepare = func(context.Context) {
			go func() { errc <- rt.StopGracefully(t.Context()) }()
			synctest.Wait()
		}
		rt, err = component.NewRuntime("app", []component.Component{first, d})
		require.NoError(t, err)
		require.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped)
		require.NoError(t, <-errc)
		<-rt.Done()
		assert.Equal(t, component.StateStopped, d.State(), "never prepared, yet stopped")
		assert.True(t, testkit.Closed(d.Done()))
	})
}

func TestEnumNames(t *testing.T) {
	assert.Equal(t, "STOPPING", component.StateStopping.String())
	assert.Equal(t, "State(9)", component.State(9).String())
	assert.Equal(t, "cancelled", dispatch.OutcomeCancelled.String())
	assert.Equal(t, "Outcome(-1)", dispatch.Outcome(-1).String())
	assert.Equal(t, "StopOnError", dispatch.StopOnError.String())
	assert.Equal(t, "ErrorPolicy(2)", dispatch.ErrorPolicy(2).String())
}

// After a timed-out stop, Done waits for a handler that ignores its context,
// and for the supplier the Runtime owns, whose scheduler runs that handler.
func TestRuntimeDoneWaitsForComponentsAfterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, err := aggregate.NewSchedulerSupplier("s", aggregate.WithParallelism(2))
		require.NoError(t, err)
		release := make(chan struct{})
		d, err := dispatch.New("orders", orders, flux.FromSlice(exchanges(4, 2)), func(context.Context, testkit.Exchange) error {
			<-release // ignores its context
			return nil
		}, quiet, dispatch.WithSchedulerSupplier(sup))
		require.NoError(t, err)
		rt, err := component.NewRuntime("app", []component.Component{d}, component.WithOwned(sup), component.WithShutdownTimeout(time.Second))
		require.NoError(t, err)
		prepareAndStart(t, rt)
		synctest.Wait()
		err = rt.StopGracefully(t.Context())
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.ErrorContains(t, err, `still running: "orders"`)
		synctest.Wait()
		assert.False(t, testkit.Closed(sup.Done()), "a handler still runs")
		assert.False(t, testkit.Closed(rt.Done()), "a handler still runs")
		close(release)
		<-rt.Done()
		assert.True(t, testkit.Closed(sup.Done()))
	})
}

// A Runtime stopped before Prepare is done, and so is the supplier it owns.
func TestRuntimeQuiescedBeforePrepareIsDone(t *testing.T) {
	sup, err := aggregate.NewSchedulerSupplier("s")
	require.NoError(t, err)
	rt, err := component.NewRuntime("app", nil, component.WithOwned(sup))
	require.NoError(t, err)
	rt.Quiesce()
	<-rt.Done()
	assert.Equal(t, component.StateStopped, rt.State())
	_, err = sup.GetOrInitialize(orders)
	assert.ErrorIs(t, err, aggregate.ErrStopped, "the supplier is stopped with it")
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

// Prepare runs once: a second call while the first is in progress is
// refused, not run alongside it.
func TestRuntimeConcurrentPrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		a := newFake("a", log)
		release := make(chan struct{})
		a.onPrepare = func(context.Context) { <-release }
		rt := newRuntime(t, []*fakeComponent{a})
		first := make(chan error, 1)
		go func() { first <- rt.Prepare(t.Context()) }()
		synctest.Wait()
		err := rt.Prepare(t.Context())
		assert.ErrorIs(t, err, dispatch.ErrIllegalState)
		assert.ErrorContains(t, err, "in progress")
		assert.ErrorIs(t, rt.Start(), dispatch.ErrIllegalState)
		close(release)
		require.NoError(t, <-first)
		assert.Equal(t, []string{"prepare:a"}, log.get())
		rt.ForceStop()
		<-rt.Done()
	})
}
