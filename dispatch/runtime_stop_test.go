package dispatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// finite is a fake component whose work ends by itself a second after
// Start, as a dispatcher's whose source completed.
type finite struct{ *fakeComponent }

func (f finite) Start() error {
	go func() {
		time.Sleep(time.Second) // virtual: the work
		f.end()
	}()
	return f.fakeComponent.Start()
}

// When every component's Done closed on its own, the Runtime is stopped:
// it stops what it owns gracefully, Done closes and Err reports the
// components' errors.
func TestRuntimeFiniteWorkEndsByItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		a, b := finite{newFake("a", log)}, finite{newFake("b", log)}
		b.err = errors.New("source failed")
		sup := &fakeSupplier{log: log}
		rt, err := component.NewRuntime("app", []component.Component{a, b}, component.WithOwned(sup))
		require.NoError(t, err)
		start := time.Now()
		prepareAndStart(t, rt)
		<-rt.Done()
		assert.Equal(t, time.Second, time.Since(start), "done when the work ended")
		assert.Equal(t, component.StateStopped, rt.State())
		assert.ErrorIs(t, rt.Err(), b.err)
		assert.Contains(t, log.get(), "supplier:graceful")
		assert.NotContains(t, log.get(), "supplier:force")
	})
}

// The same with real parts: a dispatcher whose source completes, on the
// scheduler of a supplier the Runtime owns; Run returns when the work ended.
func TestRuntimeRunEndsWithFiniteDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, err := aggregate.NewSchedulerSupplier("s", aggregate.WithParallelism(2))
		require.NoError(t, err)
		var handled atomic.Int64
		d, err := dispatch.New("orders", orders, flux.FromSlice(exchanges(10, 3)), func(context.Context, testkit.Exchange) error {
			handled.Add(1)
			return nil
		}, quiet, dispatch.WithSchedulerSupplier(sup))
		require.NoError(t, err)
		rt, err := component.NewRuntime("app", []component.Component{d}, component.WithOwned(sup))
		require.NoError(t, err)
		require.NoError(t, rt.Run(t.Context()))
		assert.Equal(t, int64(10), handled.Load())
		assert.True(t, testkit.Closed(sup.Done()), "the owned supplier is stopped and done")
		<-rt.Done()
	})
}

// Run stops gracefully when its ctx ends, and the deadline bounds the stop.
func TestRuntimeRunStopsOnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		cs := threeFakes(log)
		cs[1].hold, cs[1].ignoreCtx = make(chan struct{}), true
		rt := newRuntime(t, cs, component.WithShutdownTimeout(3*time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		err := rt.Run(ctx)
		assert.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.ErrorContains(t, err, `still running: "b"`)
		assert.Equal(t, 4*time.Second, time.Since(start), "1s of work, then the 3s deadline")
		assert.Contains(t, log.get(), "force:b")
		<-rt.Done()
	})
}

// stubborn is a fake component whose StopGracefully ignores its ctx and
// ForceStop alike: it returns only when released.
type stubborn struct {
	*fakeComponent
	release chan struct{}
}

func (s stubborn) StopGracefully(context.Context) error {
	s.log.add("stop:" + s.name)
	<-s.release
	s.end()
	return nil
}

func (s stubborn) ForceStop() { s.log.add("force:" + s.name) }

// A component whose StopGracefully ignores its ctx does not hold the
// Runtime past the deadline: the rest is forced, the error names it, and
// Done waits for it.
func TestRuntimeDeadlineWithComponentIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		a, c := newFake("a", log), newFake("c", log)
		b := stubborn{newFake("b", log), make(chan struct{})}
		b.hold = make(chan struct{}) // its Quiesce does not end it
		sup := &fakeSupplier{log: log}
		rt, err := component.NewRuntime("app", []component.Component{a, b, c}, component.WithOwned(sup),
			component.WithShutdownTimeout(5*time.Second))
		require.NoError(t, err)
		prepareAndStart(t, rt)
		start := time.Now()
		err = rt.StopGracefully(t.Context())
		assert.Equal(t, 5*time.Second, time.Since(start))
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.EqualError(t, err, `component: shutdown timed out: runtime "app" after 5s; still running: "b", "fakeSupplier"`)
		calls := log.get()
		assert.Equal(t, []string{"stop:c", "stop:b", "force:c", "force:b", "force:a", "supplier:force"}, calls[len(calls)-6:],
			"a, after b, never stopped gracefully; the supplier forced after every component")
		synctest.Wait()
		assert.False(t, testkit.Closed(rt.Done()), "b's stop still runs")
		close(b.release)
		<-rt.Done()
	})
}

// A handler calling StopGracefully with its own ctx, which never ends,
// cannot wait for the Runtime that waits for it: the call begins the stop
// and returns at once; the stop then goes on.
func TestRuntimeStopGracefullyFromInside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rt *component.Runtime
		inside := make(chan error, 1)
		started := make(chan struct{}) // the stop comes once Start returned, not during it
		d, err := dispatch.New("orders", orders, flux.FromSlice(exchanges(1, 1)), func(ctx context.Context, _ testkit.Exchange) error {
			<-started
			start := time.Now()
			inside <- rt.StopGracefully(ctx)
			if time.Since(start) != 0 {
				return errors.New("StopGracefully waited")
			}
			return nil
		}, quiet, dispatch.WithScheduler(schedulers.Immediate()))
		require.NoError(t, err)
		rt, err = component.NewRuntime("app", []component.Component{d})
		require.NoError(t, err)
		prepareAndStart(t, rt)
		close(started)
		err = <-inside
		require.ErrorIs(t, err, dispatch.ErrIllegalState)
		assert.EqualError(t, err, `component: illegal state: called from inside runtime "app": it cannot wait for itself`)
		<-rt.Done()
		assert.NoError(t, rt.Err())
		assert.Equal(t, int64(1), d.Stats().Succeeded)
	})
}

// The same from a component's Prepare, and through a nested Runtime: the
// ctx carries every Runtime it belongs to.
func TestRuntimeStopGracefullyFromInsidePrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		a := newFake("a", log)
		var outer *component.Runtime
		inside := make(chan error, 1)
		a.onPrepare = func(ctx context.Context) { inside <- outer.StopGracefully(ctx) }
		inner, err := component.NewRuntime("inner", []component.Component{a})
		require.NoError(t, err)
		outer, err = component.NewRuntime("outer", []component.Component{inner})
		require.NoError(t, err)
		require.ErrorIs(t, outer.Prepare(t.Context()), dispatch.ErrStopped)
		assert.ErrorIs(t, <-inside, dispatch.ErrIllegalState)
		<-outer.Done()
		<-inner.Done()
		assert.Contains(t, log.get(), "quiesce:a")
	})
}

// blockingForce is a fake component whose ForceStop blocks until released.
type blockingForce struct {
	*fakeComponent
	release chan struct{}
}

func (f blockingForce) ForceStop() {
	f.fakeComponent.ForceStop()
	<-f.release
}

// No lock is held across a component's method: while one's ForceStop
// blocks, the Runtime's other methods return.
func TestRuntimeHoldsNoLockAcrossComponents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := blockingForce{newFake("b", &callLog{}), make(chan struct{})}
		rt, err := component.NewRuntime("app", []component.Component{b})
		require.NoError(t, err)
		forced := make(chan struct{})
		go func() {
			rt.ForceStop()
			close(forced)
		}()
		synctest.Wait()
		assert.Equal(t, component.StateStopped, rt.State())
		rt.ForceStop() // the second returns at once
		rt.Quiesce()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		assert.NoError(t, rt.StopGracefully(ctx))
		assert.Nil(t, rt.Err())
		assert.ErrorIs(t, rt.Prepare(t.Context()), dispatch.ErrStopped)
		assert.False(t, testkit.Closed(forced))
		close(b.release)
		<-forced
		<-rt.Done()
	})
}

// A component whose Prepare waits in the supplier the Runtime owns (its
// factory blocks) does not hold ForceStop: it returns at once, and Prepare
// returns the supplier's refusal once the factory returns.
func TestRuntimeForceStopDuringPrepareInSupplier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, entered := make(chan struct{}), make(chan struct{})
		sup, err := aggregate.NewSchedulerSupplier("s", aggregate.WithSchedulerFactory(func(string, int) (schedulers.Scheduler, error) {
			close(entered)
			<-release
			return schedulers.NewParallel("s-Order", 1)
		}))
		require.NoError(t, err)
		log := &callLog{}
		rt, err := component.NewRuntime("app", []component.Component{&borrower{newFake("a", log), sup}}, component.WithOwned(sup))
		require.NoError(t, err)
		prepared := make(chan error, 1)
		go func() { prepared <- rt.Prepare(t.Context()) }()
		<-entered
		rt.ForceStop()
		assert.Equal(t, []string{"prepare:a", "force:a"}, log.get())
		synctest.Wait()
		assert.False(t, testkit.Closed(rt.Done()), "Prepare still waits")
		close(release)
		assert.ErrorIs(t, <-prepared, aggregate.ErrStopped)
		<-rt.Done()
		assert.True(t, testkit.Closed(sup.Done()))
	})
}

// A force cancels the ctx given to the components' Prepare.
func TestRuntimeForceCancelsPrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake("a", &callLog{})
		a.onPrepare = func(ctx context.Context) {
			<-ctx.Done()
			a.prepareErr = context.Cause(ctx)
		}
		rt := newRuntime(t, []*fakeComponent{a})
		prepared := make(chan error, 1)
		go func() { prepared <- rt.Prepare(t.Context()) }()
		synctest.Wait()
		rt.ForceStop()
		err := <-prepared
		assert.ErrorIs(t, err, dispatch.ErrForceStopped)
		<-rt.Done()
	})
}

// panicky is a fake component whose ForceStop and StopGracefully panic
// after doing their work.
type panicky struct{ *fakeComponent }

func (p panicky) ForceStop() {
	p.fakeComponent.ForceStop()
	panic("force kaput")
}

func (p panicky) StopGracefully(ctx context.Context) error {
	_ = p.fakeComponent.StopGracefully(ctx)
	panic("stop kaput")
}

// A panicking ForceStop or StopGracefully is recovered: the others and the
// owned resources are stopped all the same, and the panics are joined.
func TestRuntimeComponentPanics(t *testing.T) {
	t.Run("ForceStop", func(t *testing.T) {
		log := &callLog{}
		a, b := newFake("a", log), panicky{newFake("b", log)}
		sup := &fakeSupplier{log: log}
		rt, err := component.NewRuntime("app", []component.Component{a, b}, component.WithOwned(sup))
		require.NoError(t, err)
		assert.NotPanics(t, rt.ForceStop)
		assert.Equal(t, []string{"force:b", "force:a", "supplier:force"}, log.get())
		<-rt.Done()
		var pe *dispatch.PanicError
		require.ErrorAs(t, rt.Err(), &pe)
		assert.Equal(t, "force kaput", pe.Value)
		assert.ErrorContains(t, rt.Err(), `component "b" failed to force-stop`)
	})
	t.Run("StopGracefully", func(t *testing.T) {
		log := &callLog{}
		a, b := newFake("a", log), panicky{newFake("b", log)}
		sup := &fakeSupplier{log: log}
		rt, err := component.NewRuntime("app", []component.Component{a, b}, component.WithOwned(sup))
		require.NoError(t, err)
		prepareAndStart(t, rt)
		err = rt.StopGracefully(t.Context())
		var pe *dispatch.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "stop kaput", pe.Value)
		calls := log.get()
		assert.Contains(t, calls, "stop:a", "the sequence goes on")
		assert.Equal(t, "supplier:force", calls[len(calls)-1], "a failed graceful pass forces what is owned")
		<-rt.Done()
		assert.ErrorAs(t, rt.Err(), &pe)
	})
}
