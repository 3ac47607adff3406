package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// errPumpIllegal stands for a binding's own illegal-state sentinel.
var errPumpIllegal = errors.New("pump: illegal state")

// pump is a Component of another package, as a broker binding writes one
// on component.Lifecycle: Start runs one goroutine that calls work until a
// stop; a graceful stop lets the call in progress finish, a force cancels
// its context.
type pump struct {
	life   component.Lifecycle
	work   func(ctx context.Context) error
	calls  atomic.Int64
	ended  atomic.Int64 // finalizer runs
	ctx    context.Context
	cancel context.CancelCauseFunc
	quit   chan struct{}
	once   sync.Once
}

func newPump(name string, work func(ctx context.Context) error) *pump {
	p := &pump{work: work, quit: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.life.Init("pump", name, errPumpIllegal, p.end)
	return p
}

var _ component.Component = (*pump)(nil)

func (p *pump) Name() string           { return "pump" }
func (p *pump) State() component.State { return p.life.State() }
func (p *pump) Done() <-chan struct{}  { return p.life.Done() }
func (p *pump) Err() error             { return p.life.Err() }

func (p *pump) Prepare(context.Context) error {
	if err := p.life.Step("prepare", component.StateNew); err != nil {
		return err
	}
	defer p.life.Leave()
	if !p.life.Advance(component.StateNew, component.StatePrepared) {
		return p.life.Refuse("prepare")
	}
	return nil
}

func (p *pump) Start() error {
	if err := p.life.Step("start", component.StatePrepared); err != nil {
		return err
	}
	defer p.life.Leave()
	if !p.life.Advance(component.StatePrepared, component.StateRunning) {
		return p.life.Refuse("start")
	}
	p.life.Hold() // cannot fail: the Step holds
	go p.run()
	return nil
}

func (p *pump) run() {
	defer p.life.Release()
	defer p.life.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-p.ctx.Done():
			return
		default:
		}
		p.calls.Add(1)
		if err := p.work(p.ctx); err != nil {
			p.life.Record(fmt.Errorf("pump: %w", err))
			p.Quiesce()
		}
	}
}

func (p *pump) Quiesce() {
	from, first := p.life.Quiesce()
	switch {
	case !first:
	case from == component.StateRunning:
		p.once.Do(func() { close(p.quit) })
	default:
		p.life.Stop() // nothing runs
	}
}

func (p *pump) StopGracefully(ctx context.Context) error {
	p.Quiesce()
	return p.life.Await(ctx, func(err error) error {
		return fmt.Errorf("pump: not stopped after %d calls: %w", p.calls.Load(), err)
	})
}

func (p *pump) ForceStop() {
	if _, first := p.life.Force(); first {
		p.cancel(dispatch.ErrForceStopped)
	}
}

// end is the finalizer: it runs once, outside the lock, so it may read the
// lifecycle.
func (p *pump) end() {
	p.ended.Add(1)
	if p.life.State() == component.StateStopped {
		p.cancel(dispatch.ErrStopped)
	}
}

func TestLifecycleTypeStateMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		step := make(chan struct{})
		p := newPump("moves", func(ctx context.Context) error {
			select {
			case step <- struct{}{}:
			case <-ctx.Done():
			}
			return nil
		})
		assert.Equal(t, component.StateNew, p.State())
		err := p.Start()
		require.ErrorIs(t, err, dispatch.ErrIllegalState)
		require.ErrorIs(t, err, errPumpIllegal, "the component's own sentinel too")
		assert.ErrorContains(t, err, `pump: illegal state: pump "moves" cannot start from state NEW`)

		require.NoError(t, p.Prepare(t.Context()))
		assert.Equal(t, component.StatePrepared, p.State())
		require.ErrorIs(t, p.Prepare(t.Context()), dispatch.ErrIllegalState, "prepare twice")
		require.NoError(t, p.Start())
		assert.Equal(t, component.StateRunning, p.State())
		require.ErrorIs(t, p.Start(), errPumpIllegal, "start twice")
		<-step
		synctest.Wait() // the next call is in progress

		p.Quiesce()
		assert.Equal(t, component.StateStopping, p.State(), "the call in progress finishes")
		assert.False(t, testkit.Closed(p.Done()))
		<-step
		require.NoError(t, p.StopGracefully(t.Context()))
		assert.Equal(t, component.StateStopped, p.State())
		assert.Equal(t, int64(1), p.ended.Load(), "the finalizer ran once, at the physical end")
		assert.False(t, p.life.Forced())
		p.ForceStop() // after the end: a no-op for the state, idempotent
		require.NoError(t, p.StopGracefully(t.Context()), "the first stop fixed the result")
		assert.Equal(t, int64(1), p.ended.Load())
	})
}

func TestLifecycleTypeStopsBeforeStart(t *testing.T) {
	q := newPump("q", nil)
	q.Quiesce()
	assert.Equal(t, component.StateStopped, q.State(), "NEW -quiesce-> STOPPED")
	assert.True(t, testkit.Closed(q.Done()))
	require.ErrorIs(t, q.Prepare(t.Context()), errPumpIllegal)
	assert.Equal(t, int64(1), q.ended.Load())

	f := newPump("f", nil)
	require.NoError(t, f.Prepare(t.Context()))
	f.ForceStop()
	f.ForceStop()
	assert.Equal(t, component.StateStopped, f.State(), "PREPARED -force-> STOPPED")
	assert.True(t, testkit.Closed(f.Done()))
	require.ErrorIs(t, f.Start(), dispatch.ErrIllegalState, "nothing starts after a force")
	assert.ErrorIs(t, context.Cause(f.ctx), dispatch.ErrStopped, "the finalizer released Prepare's context")
	assert.Equal(t, int64(1), f.ended.Load())
}

// A Step in progress refuses another; an Enter may overlap others, and
// holds the physical end until its Release.
func TestLifecycleTypeStepAndEnter(t *testing.T) {
	var l component.Lifecycle
	ended := 0
	l.Init("consumer", "c", nil, func() { ended++ })
	require.NoError(t, l.Step("prepare", component.StateNew))
	err := l.Step("prepare", component.StateNew)
	require.ErrorIs(t, err, dispatch.ErrIllegalState)
	assert.ErrorContains(t, err, "another step is in progress")
	require.True(t, l.Advance(component.StateNew, component.StateRunning))
	l.Leave()

	require.NoError(t, l.Enter("revoke", component.StateRunning))
	require.NoError(t, l.Enter("revoke", component.StateRunning), "Enters overlap")
	from, first := l.Quiesce()
	assert.Equal(t, component.StateRunning, from)
	assert.True(t, first)
	err = l.Enter("revoke", component.StateRunning)
	require.ErrorIs(t, err, dispatch.ErrIllegalState, "none begins once the stop began")
	assert.ErrorContains(t, err, `component: illegal state: consumer "c" cannot revoke from state STOPPING`)
	l.Stop()
	assert.Equal(t, component.StateStopped, l.State())
	l.Release()
	assert.False(t, testkit.Closed(l.Done()), "one Enter still holds")
	assert.Zero(t, ended)
	l.Release()
	assert.True(t, testkit.Closed(l.Done()))
	assert.Equal(t, 1, ended)
	assert.False(t, l.Hold(), "no hold after the physical end")
}

// Await returns at the deadline with the onTimeout's error, wrapping ctx's,
// while the work goes on; a later call returns the recorded error once the
// work ended.
func TestLifecycleTypeAwaitWithADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		began, finish := make(chan struct{}), make(chan struct{})
		p := newPump("slow", func(ctx context.Context) error {
			close(began)
			<-finish
			return errors.New("last call failed")
		})
		require.NoError(t, p.Prepare(t.Context()))
		require.NoError(t, p.Start())
		<-began
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		from := time.Now()
		err := p.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "pump: not stopped after 1 calls")
		assert.Equal(t, time.Second, time.Since(from))
		assert.Equal(t, component.StateStopping, p.State(), "the drain goes on")

		close(finish)
		err = p.StopGracefully(t.Context())
		require.Error(t, err)
		assert.EqualError(t, err, "pump: last call failed")
		assert.Same(t, p.Err(), err)
	})
}

// A force takes over a graceful stop in progress: the state is STOPPED at
// once, the waiting StopGracefully returns once the cancelled work
// returned, and nothing graceful starts after it.
func TestLifecycleTypeForceTakesOverAGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		running := make(chan struct{})
		p := newPump("stuck", func(ctx context.Context) error {
			close(running)
			<-ctx.Done() // ignores the graceful stop
			return nil
		})
		require.NoError(t, p.Prepare(t.Context()))
		require.NoError(t, p.Start())
		<-running
		stopped := make(chan error, 1)
		go func() { stopped <- p.StopGracefully(context.Background()) }()
		synctest.Wait()
		assert.Equal(t, component.StateStopping, p.State())
		assert.Empty(t, stopped, "the graceful stop waits for the stuck call")

		from, first := p.life.Force()
		assert.Equal(t, component.StateStopping, from)
		assert.True(t, first)
		assert.Equal(t, component.StateStopped, p.State(), "the logical end, at once")
		assert.False(t, testkit.Closed(p.Done()), "the physical end waits for the call")
		assert.False(t, p.life.Advance(component.StateStopping, component.StateStopped), "nothing graceful after a force")
		_, again := p.life.Force()
		assert.False(t, again)

		p.cancel(dispatch.ErrForceStopped)
		require.NoError(t, <-stopped)
		assert.True(t, testkit.Closed(p.Done()))
		assert.True(t, p.life.Forced())
		assert.Equal(t, int64(1), p.ended.Load())
	})
}

// Stops of every kind from many goroutines, while the component prepares
// and starts: one Force is first, the finalizer runs once, Done closes,
// every waiter returns nil or a recorded failure, and -race sees no race.
func TestLifecycleTypeConcurrentStops(t *testing.T) {
	for range 200 {
		p := newPump("race", func(ctx context.Context) error { return nil })
		var quiesced, forced atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 8)
		wg.Go(func() {
			<-start
			if err := p.Prepare(context.Background()); err == nil {
				_ = p.Start()
			}
		})
		for i := range 8 {
			wg.Go(func() {
				<-start
				switch i % 4 {
				case 0:
					if _, first := p.life.Quiesce(); first {
						quiesced.Add(1)
					}
					p.Quiesce()
				case 1:
					if _, first := p.life.Force(); first {
						forced.Add(1)
						p.cancel(dispatch.ErrForceStopped)
					}
				case 2:
					p.life.Record(errors.New("failure"))
					p.Quiesce()
				case 3:
					p.ForceStop()
				}
				errs <- p.StopGracefully(context.Background())
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				assert.EqualError(t, err, "failure")
			}
		}
		require.True(t, testkit.Closed(p.Done()))
		assert.Equal(t, component.StateStopped, p.State())
		assert.True(t, p.life.Forced())
		assert.LessOrEqual(t, quiesced.Load(), int64(1))
		assert.LessOrEqual(t, forced.Load(), int64(1), "one force is the first")
		assert.Equal(t, int64(1), p.ended.Load(), "the finalizer ran once")
	}
}
