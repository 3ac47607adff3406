package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// How a property component behaves.
const (
	cooperates = "cooperates"  // drains some time after Quiesce; its stop honours ctx
	ignoresCtx = "ignores-ctx" // never drains by itself; its stop ignores ctx, a force ends it
	panics     = "panics"      // its StopGracefully and ForceStop panic (after ending it)
	blocks     = "blocks"      // its Prepare blocks until its ctx ends or a force
)

// propComponent is a Component of the property test. Whatever it does, a
// ForceStop ends it; its goroutines exit once it ended. It reports misuse: a
// second Prepare or Start, a Start before Prepare.
type propComponent struct {
	name     string
	kind     string
	drain    time.Duration // after Quiesce, for cooperates and panics
	finite   time.Duration // when positive, done by itself this long after Start
	misuse   func(string)
	prepared atomic.Int32
	started  atomic.Int32

	quiesce, force, end sync.Once
	forced, done        chan struct{}
}

func (p *propComponent) Name() string { return p.name }

func (p *propComponent) Prepare(ctx context.Context) error {
	if p.prepared.Add(1) > 1 {
		p.misuse("prepared twice")
	}
	if p.kind == blocks {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-p.forced:
			return dispatch.ErrForceStopped
		}
	}
	return nil
}

func (p *propComponent) Start() error {
	if p.prepared.Load() == 0 {
		p.misuse("started before Prepare")
	}
	if p.started.Add(1) > 1 {
		p.misuse("started twice")
	}
	if p.finite > 0 {
		go p.endAfter(p.finite)
	}
	return nil
}

// endAfter ends p after d, unless it ended before.
func (p *propComponent) endAfter(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		p.finish()
	case <-p.done:
	}
}

func (p *propComponent) Quiesce() {
	if p.kind == ignoresCtx {
		return
	}
	p.quiesce.Do(func() { go p.endAfter(p.drain) })
}

func (p *propComponent) StopGracefully(ctx context.Context) error {
	p.Quiesce()
	switch p.kind {
	case ignoresCtx:
		select {
		case <-p.done:
		case <-p.forced:
		}
		return nil
	case panics:
		<-p.done
		panic(p.name + ": stop")
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *propComponent) ForceStop() {
	p.force.Do(func() { close(p.forced) })
	p.finish()
	if p.kind == panics {
		panic(p.name + ": force")
	}
}

func (p *propComponent) finish()               { p.end.Do(func() { close(p.done) }) }
func (p *propComponent) Done() <-chan struct{} { return p.done }
func (p *propComponent) Err() error            { return nil }

// propCall is one call of the property test, on one goroutine, after a
// pause: within is how long its ctx lives (0: a ctx that never ends, for
// StopGracefully).
type propCall struct {
	op     string
	pause  time.Duration
	within time.Duration
}

func drawCalls(t *rapid.T, label string) []propCall {
	ops := []string{"Prepare", "Start", "Quiesce", "StopGracefully", "ForceStop", "Run"}
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) propCall {
		return propCall{
			op:     rapid.SampledFrom(ops).Draw(t, "op"),
			pause:  time.Duration(rapid.IntRange(0, 3000).Draw(t, "pause ms")) * time.Millisecond,
			within: time.Duration(rapid.IntRange(0, 6000).Draw(t, "ctx ms")) * time.Millisecond,
		}
	}), 0, 4).Draw(t, label)
}

// Random interleavings of every lifecycle call from three goroutines, on a
// Runtime of components that cooperate, ignore their ctx, panic or block,
// with or without an owned supplier: every call returns within its bound in
// virtual time, Done closes after a force, every component and resource is
// done then, and no goroutine is left (the bubble fails on any).
func TestPropertyRuntimeLifecycle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 4).Draw(t, "components")
		kinds := make([]string, n)
		drains, finites := make([]time.Duration, n), make([]time.Duration, n)
		for i := range n {
			kinds[i] = rapid.SampledFrom([]string{cooperates, ignoresCtx, panics, blocks}).Draw(t, "kind")
			drains[i] = time.Duration(rapid.IntRange(0, 3000).Draw(t, "drain ms")) * time.Millisecond
			finites[i] = time.Duration(rapid.IntRange(0, 4000).Draw(t, "finite ms")) * time.Millisecond
		}
		timeout := time.Duration(rapid.IntRange(1, 5).Draw(t, "timeout s")) * time.Second
		owns := rapid.Bool().Draw(t, "owns a supplier")
		calls := [][]propCall{drawCalls(t, "g0"), drawCalls(t, "g1"), drawCalls(t, "g2")}
		rapid.SyncTest(t, func(t *rapid.T) {
			var mu sync.Mutex
			var violations []string
			report := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				violations = append(violations, fmt.Sprintf(format, args...))
			}
			components := make([]component.Component, n)
			for i := range n {
				components[i] = &propComponent{
					name: fmt.Sprintf("c%d", i), kind: kinds[i], drain: drains[i], finite: finites[i],
					misuse: func(what string) { report("c%d %s", i, what) },
					forced: make(chan struct{}), done: make(chan struct{}),
				}
			}
			opts := []component.RuntimeOption{component.WithShutdownTimeout(timeout)}
			var sup *aggregate.Supplier
			if owns {
				var err error
				if sup, err = aggregate.NewSchedulerSupplier("s"); err != nil {
					t.Fatal(err)
				}
				opts = append(opts, component.WithOwned(sup))
			}
			rt, err := component.NewRuntime("app", components, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g, seq := range calls {
				wg.Go(func() {
					for _, c := range seq {
						time.Sleep(c.pause)
						start := time.Now()
						bound := callRuntime(rt, c, timeout)
						if took := time.Since(start); took > bound {
							report("g%d: %s took %v, more than %v", g, c.op, took, bound)
						}
					}
				})
			}
			wg.Wait()
			rt.ForceStop()
			<-rt.Done()
			if rt.State() != component.StateStopped {
				report("state %v after Done", rt.State())
			}
			for _, c := range components {
				if !testkit.Closed(c.Done()) {
					report("%s not done after the Runtime's Done", c.Name())
				}
			}
			if sup != nil && !testkit.Closed(sup.Done()) {
				report("owned supplier not done after the Runtime's Done")
			}
			for _, v := range violations {
				t.Error(v)
			}
		})
	})
}

// callRuntime makes call c on rt and returns how long it may take.
func callRuntime(rt *component.Runtime, c propCall, timeout time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), c.within)
	defer cancel()
	switch c.op {
	case "Prepare":
		_ = rt.Prepare(ctx)
		return c.within
	case "Start":
		_ = rt.Start()
	case "Quiesce":
		rt.Quiesce()
	case "ForceStop":
		rt.ForceStop()
	case "StopGracefully":
		if c.within == 0 {
			_ = rt.StopGracefully(context.Background())
			return timeout
		}
		_ = rt.StopGracefully(ctx)
		return min(c.within, timeout)
	case "Run":
		_ = rt.Run(ctx)
		return c.within + timeout
	}
	return 0
}
