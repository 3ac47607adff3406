package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

func newRuntime(t *testing.T, cs []*fakeComponent, opts ...dispatch.RuntimeOption) *dispatch.Runtime {
	t.Helper()
	components := make([]dispatch.Component, len(cs))
	for i, c := range cs {
		components[i] = c
	}
	rt, err := dispatch.NewRuntime(components, opts...)
	require.NoError(t, err)
	return rt
}

func threeFakes(log *callLog) []*fakeComponent {
	return []*fakeComponent{newFake("a", log), newFake("b", log), newFake("c", log)}
}

func TestRuntimeOrder(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	require.NoError(t, rt.Start(t.Context()))
	require.NoError(t, rt.StopGracefully(t.Context()))
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "prepare:c", // readiness barrier
		"start:a", "start:b", "start:c",
		"quiesce:a", "quiesce:b", "quiesce:c",
		"stop:c", "stop:b", "stop:a",
	}, log.get())
	<-rt.Done()
	assert.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped, "one-shot")
	assert.NoError(t, rt.StopGracefully(t.Context()), "a later stop observes the same result")
}

func TestRuntimeInvalidArguments(t *testing.T) {
	a := newFake("a", &callLog{})
	_, err := dispatch.NewRuntime([]dispatch.Component{a, nil})
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument)
	_, err = dispatch.NewRuntime([]dispatch.Component{a, a})
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument)
	_, err = dispatch.NewRuntime([]dispatch.Component{a}, dispatch.WithShutdownTimeout(0))
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
}

func TestRuntimePrepareFailureForcesAllInReverse(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	boom := errors.New("boom")
	cs[1].prepareErr = boom
	rt := newRuntime(t, cs)
	err := rt.Start(t.Context())
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"prepare:a", "prepare:b", "force:c", "force:b", "force:a"}, log.get(),
		"c, never prepared, is stopped too")
	<-rt.Done()
	assert.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped)
}

func TestRuntimeStartFailureForcesAllInReverse(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	boom := errors.New("boom")
	cs[1].startErr = boom
	rt := newRuntime(t, cs)
	require.ErrorIs(t, rt.Start(t.Context()), boom)
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "prepare:c", "start:a", "start:b",
		"force:c", "force:b", "force:a",
	}, log.get())
}

func TestRuntimeStartTwice(t *testing.T) {
	rt := newRuntime(t, threeFakes(&callLog{}))
	require.NoError(t, rt.Start(t.Context()))
	assert.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrIllegalState)
	rt.ForceStop()
}

func TestRuntimeStopBeforeStart(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	require.NoError(t, rt.StopGracefully(t.Context()))
	<-rt.Done()
	assert.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped)
	assert.Equal(t, []string{"quiesce:a", "quiesce:b", "quiesce:c"}, log.get(),
		"quiescing a component never prepared stops it")
}

func TestRuntimeForceStopBeforeStart(t *testing.T) {
	log := &callLog{}
	rt := newRuntime(t, threeFakes(log))
	rt.ForceStop()
	rt.ForceStop()
	<-rt.Done()
	assert.Equal(t, []string{"force:c", "force:b", "force:a"}, log.get(), "force covers every component, once")
	assert.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped)
}

func TestRuntimeDeadlineForcesInReverse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[1].hold = make(chan struct{}) // b never drains by itself
		rt := newRuntime(t, cs, dispatch.WithShutdownTimeout(5*time.Second))
		require.NoError(t, rt.Start(t.Context()))
		start := time.Now()
		err := rt.StopGracefully(t.Context())
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.Equal(t, 5*time.Second, time.Since(start), "one deadline for the whole stop")
		assert.Equal(t, []string{
			"prepare:a", "prepare:b", "prepare:c", "start:a", "start:b", "start:c",
			"quiesce:a", "quiesce:b", "quiesce:c", "stop:c", "stop:b",
			"force:c", "force:b", "force:a",
		}, log.get())
		<-rt.Done()
		assert.ErrorIs(t, rt.StopGracefully(t.Context()), dispatch.ErrShutdownTimeout, "the result is kept")
	})
}

func TestRuntimeCallerContextEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[0].hold = make(chan struct{})
		rt := newRuntime(t, cs)
		require.NoError(t, rt.Start(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := rt.StopGracefully(ctx)
		assert.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, log.get(), "force:a")
	})
}

func TestRuntimeForceDuringGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[2].hold = make(chan struct{})
		rt := newRuntime(t, cs)
		require.NoError(t, rt.Start(t.Context()))
		errc := make(chan error, 2)
		go func() { errc <- rt.StopGracefully(t.Context()) }()
		go func() { errc <- rt.StopGracefully(t.Context()) }()
		synctest.Wait() // both callers wait; c holds
		rt.ForceStop()
		assert.NoError(t, <-errc)
		assert.NoError(t, <-errc)
		<-rt.Done()
		calls := log.get()
		assert.Equal(t, []string{"force:c", "force:b", "force:a"}, calls[len(calls)-3:])
	})
}

func TestRuntimeStopErrorsJoined(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	e1, e2 := errors.New("e1"), errors.New("e2")
	cs[0].stopErr, cs[2].stopErr = e1, e2
	rt := newRuntime(t, cs)
	require.NoError(t, rt.Start(t.Context()))
	err := rt.StopGracefully(t.Context())
	assert.ErrorIs(t, err, e1)
	assert.ErrorIs(t, err, e2)
	assert.NotErrorIs(t, err, dispatch.ErrShutdownTimeout)
	assert.Contains(t, log.get(), "stop:a", "a failing component does not stop the sequence")
}

func TestRuntimeForceDuringStart(t *testing.T) {
	log := &callLog{}
	cs := threeFakes(log)
	var rt *dispatch.Runtime
	cs[1].onPrepare = func() { rt.ForceStop() }
	rt = newRuntime(t, cs)
	err := rt.Start(t.Context())
	require.ErrorIs(t, err, dispatch.ErrStopped)
	assert.Equal(t, []string{
		"prepare:a", "prepare:b", "force:c", "force:b", "force:a",
		"force:c", "force:b", "force:a", // compensation after the racing Prepare
	}, log.get())
	<-rt.Done()
}

func TestRuntimeGracefulDuringStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		var rt *dispatch.Runtime
		errc := make(chan error, 1)
		cs[1].onPrepare = func() {
			go func() { errc <- rt.StopGracefully(t.Context()) }()
			synctest.Wait() // the stop waits for Start to return
		}
		rt = newRuntime(t, cs)
		require.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped)
		require.NoError(t, <-errc)
		assert.Equal(t, []string{
			"prepare:a", "prepare:b",
			"quiesce:a", "quiesce:b", "quiesce:c", "stop:c", "stop:b", "stop:a", // c was never prepared
		}, log.get())
	})
}

func TestRuntimeGracefulDuringStartStopsUnpreparedDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := newFake("a", &callLog{})
		d, err := dispatch.New("orders", orders, flux.FromSlice(exchanges(3, 1)),
			func(context.Context, testkit.Exchange) error { return nil }, quiet)
		require.NoError(t, err)
		var rt *dispatch.Runtime
		errc := make(chan error, 1)
		first.onPrepare = func() {
			go func() { errc <- rt.StopGracefully(t.Context()) }()
			synctest.Wait()
		}
		rt, err = dispatch.NewRuntime([]dispatch.Component{first, d})
		require.NoError(t, err)
		require.ErrorIs(t, rt.Start(t.Context()), dispatch.ErrStopped)
		require.NoError(t, <-errc)
		<-rt.Done()
		assert.Equal(t, dispatch.StateStopped, d.State(), "never prepared, yet stopped")
		assert.True(t, isClosed(d.Done()))
	})
}

func TestEnumNames(t *testing.T) {
	assert.Equal(t, "STOPPING", dispatch.StateStopping.String())
	assert.Equal(t, "State(9)", dispatch.State(9).String())
	assert.Equal(t, "cancelled", dispatch.OutcomeCancelled.String())
	assert.Equal(t, "Outcome(-1)", dispatch.Outcome(-1).String())
	assert.Equal(t, "StopOnError", dispatch.StopOnError.String())
	assert.Equal(t, "ErrorPolicy(2)", dispatch.ErrorPolicy(2).String())
}

func TestCompositeStoppedBeforePrepareIsDone(t *testing.T) {
	sup, err := aggregate.NewSchedulerSupplier("s")
	require.NoError(t, err)
	comp, err := dispatch.NewComposite("comp", sup)
	require.NoError(t, err)
	comp.Quiesce()
	<-comp.Done()
	assert.Equal(t, dispatch.StateStopped, comp.State())
	_, err = sup.GetOrInitialize(orders)
	assert.ErrorIs(t, err, aggregate.ErrStopped, "the supplier is stopped with it")
}
