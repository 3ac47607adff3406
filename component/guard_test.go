package component_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
)

var errBoom = errors.New("boom")

// Call tells the three ends of user code apart: a return (its error), a
// panic (a *PanicError with the panicking frames), a Goexit (reported to
// exited before the goroutine unwinds; Call does not return).
func TestCallTellsPanicFromGoexit(t *testing.T) {
	exited := func(*component.PanicError) { t.Error("exited called without a Goexit") }
	assert.NoError(t, component.Call(func() error { return nil }, exited))
	assert.ErrorIs(t, component.Call(func() error { return errBoom }, exited), errBoom)

	err := component.Call(func() error { panic(errBoom) }, exited)
	var p *component.PanicError
	require.ErrorAs(t, err, &p)
	assert.ErrorIs(t, err, errBoom, "panic(err) unwraps to err")
	assert.Contains(t, string(p.Stack), "TestCallTellsPanicFromGoexit", "the stack shows the panicking frames")

	var nilPanic *runtime.PanicNilError
	assert.ErrorAs(t, component.Call(func() error { panic(nil) }, exited), &nilPanic, "panic(nil) is a panic, not a Goexit")

	done := make(chan struct{})
	var got *component.PanicError
	returned := false
	go func() {
		defer close(done)
		_ = component.Call(func() error { runtime.Goexit(); return nil }, func(p *component.PanicError) { got = p })
		returned = true
	}()
	<-done
	assert.False(t, returned, "a Goexit cannot be stopped")
	require.NotNil(t, got)
	assert.ErrorIs(t, got, component.ErrGoexit)

	done = make(chan struct{})
	go func() { // nil exited: the Goexit goes on unreported
		defer close(done)
		_ = component.Call(func() error { runtime.Goexit(); return nil }, nil)
		t.Error("Call returned after a Goexit")
	}()
	<-done
}

// A panic inside exited itself (a report's user code) goes on up: the
// guard does not swallow what it did not guard.
func TestCallExitedPanicsOn(t *testing.T) {
	done := make(chan any)
	go func() {
		defer func() { done <- recover() }()
		_ = component.Call(func() error { runtime.Goexit(); return nil }, func(*component.PanicError) { panic("in exited") })
	}()
	assert.Equal(t, "in exited", <-done)
}

func newLifecycle() *component.Lifecycle {
	l := new(component.Lifecycle)
	l.Init("thing", "t", nil, nil)
	return l
}

// Go holds the lifecycle for its goroutine (Done waits for it), records
// how f ended, named, the first error winning, and starts nothing once the
// physical end was reached.
func TestGoHoldsGuardsRecordsReleases(t *testing.T) {
	l := newLifecycle()
	release := make(chan struct{})
	require.True(t, l.Go("pump", func() error { <-release; return errBoom }))
	require.True(t, l.Go("panicker", func() error { <-release; panic("later") }))
	l.Stop()
	select {
	case <-l.Done():
		t.Fatal("Done closed while goroutines of Go run")
	default:
	}
	close(release)
	<-l.Done()
	err := l.Err()
	require.Error(t, err)
	if errors.Is(err, errBoom) {
		assert.EqualError(t, err, `thing "t": pump: boom`)
	} else {
		var p *component.PanicError
		require.ErrorAs(t, err, &p)
		assert.Equal(t, "later", p.Value)
		assert.Contains(t, err.Error(), `thing "t": panicker: panic: later`)
	}
	assert.False(t, l.Go("late", func() error { t.Error("started after the physical end"); return nil }))
}

// A Goexit in Go's f is recorded as a *PanicError of ErrGoexit, and the
// hold is given back all the same.
func TestGoRecordsGoexit(t *testing.T) {
	l := newLifecycle()
	require.True(t, l.Go("exiter", func() error { runtime.Goexit(); return nil }))
	l.Stop()
	<-l.Done()
	assert.ErrorIs(t, l.Err(), component.ErrGoexit)
	assert.Contains(t, l.Err().Error(), `thing "t": exiter: panic: component: runtime.Goexit called`)
}

// Lifecycle.Call returns a panic and records a Goexit before the unwind.
func TestLifecycleCall(t *testing.T) {
	l := newLifecycle()
	var p *component.PanicError
	require.ErrorAs(t, l.Call(func() error { panic(1) }), &p)
	assert.NoError(t, l.Err(), "a panic is returned, not recorded")
	require.True(t, l.Go("inline", func() error {
		_ = l.Call(func() error { runtime.Goexit(); return nil })
		t.Error("Call returned after a Goexit")
		return nil
	}))
	l.Stop()
	<-l.Done()
	assert.ErrorIs(t, l.Err(), component.ErrGoexit)
	assert.Contains(t, l.Err().Error(), `thing "t": call: panic`, "Call's record, which is first")
}

// Unfinished says which end is missing, in the state's terms.
func TestUnfinished(t *testing.T) {
	l := newLifecycle()
	assert.Equal(t, "not stopped", l.Unfinished())
	require.True(t, l.Hold())
	l.Quiesce()
	assert.Equal(t, "not stopped", l.Unfinished())
	l.Stop()
	assert.Equal(t, component.StateStopped, l.State())
	assert.Equal(t, "stopped, not done", l.Unfinished())
	l.Release()
	<-l.Done()
	assert.Equal(t, "done", l.Unfinished())
}

// Marked sees the marks of every component a context was handed down by.
func TestMarkChain(t *testing.T) {
	a, b, c := new(int), new(int), new(int)
	ctx := component.Mark(component.Mark(context.Background(), a), b)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	assert.True(t, component.Marked(ctx, a))
	assert.True(t, component.Marked(ctx, b))
	assert.False(t, component.Marked(ctx, c))
	assert.False(t, component.Marked(context.Background(), a))
}

// An Init with its own sentinel: refusals are both that sentinel and
// ErrIllegalState, with the sentinel's message.
func TestInitSentinel(t *testing.T) {
	own := errors.New("mine: stopped")
	l := new(component.Lifecycle)
	l.Init("thing", "t", own, nil)
	l.Stop()
	err := l.Refuse("start")
	assert.ErrorIs(t, err, own)
	assert.ErrorIs(t, err, component.ErrIllegalState)
	assert.EqualError(t, err, `mine: stopped: thing "t" cannot start from state STOPPED`)
}

// Catch, deferred, sets the panic as a *PanicError and leaves a return be.
func TestCatch(t *testing.T) {
	f := func(fail bool) (err error) {
		defer component.Catch(&err)
		if fail {
			panic(errBoom)
		}
		return errors.New("returned")
	}
	var p *component.PanicError
	require.ErrorAs(t, f(true), &p)
	assert.ErrorIs(t, p, errBoom)
	assert.EqualError(t, f(false), "returned")
}

// Go calls end once, on f's goroutine, however f ended.
func TestGoCallsEndOnEveryPath(t *testing.T) {
	for name, f := range map[string]func() error{
		"return": func() error { return errBoom },
		"panic":  func() error { panic(errBoom) },
		"goexit": func() error { runtime.Goexit(); return nil },
	} {
		ends := make(chan error, 2)
		component.Go(f, func(err error) { ends <- err })
		err := <-ends
		switch name {
		case "return":
			assert.Equal(t, errBoom, err, name)
		case "panic":
			var p *component.PanicError
			require.ErrorAs(t, err, &p, name)
			assert.Equal(t, errBoom, p.Value)
		case "goexit":
			assert.ErrorIs(t, err, component.ErrGoexit, name)
		}
		select {
		case err := <-ends:
			t.Errorf("%s: end called twice, then with %v", name, err)
		default:
		}
	}
}

// RecoverAt recovers at its stage only; elsewhere the panic goes on.
func TestRecoverAt(t *testing.T) {
	type stage int
	const (
		keying stage = iota
		admitting
	)
	run := func(at stage) (p *component.PanicError, escaped any) {
		defer func() { escaped = recover() }()
		func() {
			s := keying
			defer component.RecoverAt(&s, keying, &p)
			s = at
			panic(errBoom)
		}()
		return p, nil
	}
	p, escaped := run(keying)
	require.NotNil(t, p)
	assert.ErrorIs(t, p, errBoom)
	assert.Nil(t, escaped)
	p, escaped = run(admitting)
	assert.Nil(t, p)
	assert.Equal(t, errBoom, escaped, "a panic at another stage goes on")
}

// GoEach waits for every f(i) and reports how each ended, by index: an
// error, a panic, a Goexit (which ends its own goroutine only).
func TestGoEachReportsEachEnd(t *testing.T) {
	ran := make([]bool, 4)
	errs := component.GoEach(4, func(i int) error {
		ran[i] = true
		switch i {
		case 1:
			return errBoom
		case 2:
			panic("two")
		case 3:
			runtime.Goexit()
		}
		return nil
	})
	require.Len(t, errs, 4)
	assert.Equal(t, []bool{true, true, true, true}, ran)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], errBoom)
	var p *component.PanicError
	require.ErrorAs(t, errs[2], &p)
	assert.Equal(t, "two", p.Value)
	require.ErrorAs(t, errs[3], &p)
	assert.Equal(t, component.ErrGoexit, p.Value)
	assert.Empty(t, component.GoEach(0, func(int) error { panic("not called") }))
}
