package flux_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// Reactor's cases for the lifecycle hooks (FluxPeekTest, FluxDoOnEachTest),
// translated: each hook records what it saw into log, the subscriber records
// "item v", and the order of the log and the end of the flow are compared.
func TestLifecycleHooks(t *testing.T) {
	leakFree(t)
	type rec = func(string)
	ev := func(log rec) func(flux.Event[int]) {
		return func(e flux.Event[int]) {
			switch e.Kind {
			case flux.SignalNext:
				log(fmt.Sprintf("each next %d", e.Value))
			case flux.SignalError:
				log("each error " + e.Err.Error())
			default:
				log("each " + e.Kind.String())
			}
		}
	}
	cases := []struct {
		name  string
		build func(log rec) flux.Flux[int]
		want  []string
		err   error // nil: completes
		panic bool  // the flow ends with a *PanicError
	}{
		{name: "doOnSubscribe runs before the first item", build: func(log rec) flux.Flux[int] {
			return flux.Just(1, 2).DoOnSubscribe(func() { log("subscribe") })
		}, want: []string{"subscribe", "item 1", "item 2"}},
		{name: "doOnSubscribe runs per subscription", build: func(log rec) flux.Flux[int] {
			f := flux.Just(1).DoOnSubscribe(func() { log("subscribe") })
			return flux.Concat(f, f)
		}, want: []string{"subscribe", "item 1", "subscribe", "item 1"}},
		{name: "doOnSubscribe callback error: the source is not subscribed", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnNext(func(int) { log("source ran") }).DoOnSubscribe(func() { panic("boom") })
		}, panic: true},
		{name: "doOnCancel on take", build: func(log rec) flux.Flux[int] {
			return flux.Range(1, 10).DoOnCancel(func() { log("cancel") }).Take(2)
		}, want: []string{"item 1", "item 2", "cancel"}},
		{name: "doOnCancel not on complete", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnCancel(func() { log("cancel") })
		}, want: []string{"item 1"}},
		{name: "doOnCancel not on error", build: func(log rec) flux.Flux[int] {
			return flux.Error[int](errBoom).DoOnCancel(func() { log("cancel") })
		}, err: errBoom},
		{name: "doOnCancel callback error is joined to the downstream's error", build: func(log rec) flux.Flux[int] {
			return flux.Range(1, 10).DoOnCancel(func() { panic("boom") }).DoOnNext(func(int) { panic(errBoom) })
		}, err: errBoom, panic: true},
		{name: "doOnTerminate on complete", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnTerminate(func() { log("terminate") })
		}, want: []string{"item 1", "terminate"}},
		{name: "doOnTerminate on error", build: func(log rec) flux.Flux[int] {
			return flux.Error[int](errBoom).DoOnTerminate(func() { log("terminate") })
		}, want: []string{"terminate"}, err: errBoom},
		{name: "doOnTerminate not on cancel", build: func(log rec) flux.Flux[int] {
			return flux.Range(1, 10).DoOnTerminate(func() { log("terminate") }).Take(1)
		}, want: []string{"item 1"}},
		{name: "doOnTerminate callback error on complete", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnTerminate(func() { panic("boom") })
		}, want: []string{"item 1"}, panic: true},
		{name: "doOnTerminate callback error on error keeps both", build: func(log rec) flux.Flux[int] {
			return flux.Error[int](errBoom).DoOnTerminate(func() { panic("boom") })
		}, err: errBoom, panic: true},
		{name: "doAfterTerminate on complete and error, not on cancel", build: func(log rec) flux.Flux[int] {
			return flux.Concat(
				flux.Just(1).DoAfterTerminate(func() { log("after 1") }),
				flux.Range(2, 5).DoAfterTerminate(func() { log("after 2") }).Take(1),
				flux.Error[int](errBoom).DoAfterTerminate(func() { log("after 3") }))
		}, want: []string{"item 1", "after 1", "item 2", "after 3"}, err: errBoom},
		{name: "doOnTerminate before doAfterTerminate", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnTerminate(func() { log("terminate") }).DoAfterTerminate(func() { log("after") })
		}, want: []string{"item 1", "terminate", "after"}},
		{name: "doAfterTerminate callback error", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoAfterTerminate(func() { panic("boom") })
		}, want: []string{"item 1"}, panic: true},
		{name: "doOnEach next and complete", build: func(log rec) flux.Flux[int] {
			return flux.Just(1, 2).DoOnEach(ev(log))
		}, want: []string{"each next 1", "item 1", "each next 2", "item 2", "each complete"}},
		{name: "doOnEach empty", build: func(log rec) flux.Flux[int] {
			return flux.Empty[int]().DoOnEach(ev(log))
		}, want: []string{"each complete"}},
		{name: "doOnEach error", build: func(log rec) flux.Flux[int] {
			return flux.Concat(flux.Just(1), flux.Error[int](errBoom)).DoOnEach(ev(log))
		}, want: []string{"each next 1", "item 1", "each error boom"}, err: errBoom},
		{name: "doOnEach sees no cancel", build: func(log rec) flux.Flux[int] {
			return flux.Range(1, 10).DoOnEach(ev(log)).Take(1)
		}, want: []string{"each next 1", "item 1"}},
		{name: "doOnEach next callback error", build: func(log rec) flux.Flux[int] {
			return flux.Just(1, 2).DoOnEach(func(e flux.Event[int]) {
				log("each " + e.Kind.String())
				if e.Kind == flux.SignalNext {
					panic("boom")
				}
			})
		}, want: []string{"each next", "each error"}, panic: true},
		{name: "doOnEach complete callback error", build: func(log rec) flux.Flux[int] {
			return flux.Just(1).DoOnEach(func(e flux.Event[int]) {
				if e.Kind == flux.SignalComplete {
					panic("boom")
				}
			})
		}, want: []string{"item 1"}, panic: true},
		{name: "doOnEach error callback error keeps both", build: func(log rec) flux.Flux[int] {
			return flux.Error[int](errBoom).DoOnEach(func(flux.Event[int]) { panic("boom") })
		}, err: errBoom, panic: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log []string
			rec := func(s string) { log = append(log, s) }
			err := c.build(rec).Subscribe(t.Context(), func(v int) error {
				rec(fmt.Sprintf("item %d", v))
				return nil
			})
			require.Equal(t, c.want, log)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
			}
			var pe *flux.PanicError
			require.Equal(t, c.panic, errors.As(err, &pe), "panic in %v", err)
			if c.err == nil && !c.panic {
				require.NoError(t, err)
			}
		})
	}
}

// A cancellation by the end of ctx is a cancel to DoOnCancel, and no signal
// to DoOnTerminate or DoOnEach.
func TestHooksOnContextEnd(t *testing.T) {
	leakFree(t)
	ctx, cancel := context.WithCancel(t.Context())
	var cancels, terminates, events int
	err := flux.Range(0, 100).
		DoOnEach(func(flux.Event[int]) { events++ }).
		DoOnTerminate(func() { terminates++ }).
		DoOnCancel(func() { cancels++ }).
		Subscribe(ctx, func(v int) error {
			if v == 2 {
				cancel()
			}
			return nil
		})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, cancels)
	require.Equal(t, 0, terminates)
	require.LessOrEqual(t, events, 4, "items only, no terminal event")
}

func TestHooksInvalidArguments(t *testing.T) {
	src := flux.Just(1)
	for name, f := range map[string]flux.Flux[int]{
		"DoOnSubscribe":    src.DoOnSubscribe(nil),
		"DoOnCancel":       src.DoOnCancel(nil),
		"DoOnTerminate":    src.DoOnTerminate(nil),
		"DoAfterTerminate": src.DoAfterTerminate(nil),
		"DoOnEach":         src.DoOnEach(nil),
	} {
		err := f.Subscribe(t.Context(), func(int) error { return nil })
		require.ErrorIs(t, err, flux.ErrInvalidArgument, name)
		require.ErrorContains(t, err, name)
	}
}
