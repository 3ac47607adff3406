package flux_test

import (
	"context"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

func boom[T any](T) T { panic("boom") }

// Every kind of user function that panics ends the flow with an error
// carrying *PanicError; the test process survives.
func TestPanicsBecomeErrors(t *testing.T) {
	s := newParallel(t, 2)
	src := flux.Range(0, 5)
	alwaysTrue := func(int) bool { panic("boom") }
	cases := map[string]flux.Flux[int]{
		"Map":             flux.Map(src, boom[int]),
		"Filter":          src.Filter(alwaysTrue),
		"DoOnNext":        src.DoOnNext(func(int) { panic("boom") }),
		"DoOnError":       flux.Error[int](errBoom).DoOnError(func(error) { panic("boom") }),
		"DoOnComplete":    src.DoOnComplete(func() { panic("boom") }),
		"DoFinally":       src.DoFinally(func(flux.Signal) { panic("boom") }),
		"OnErrorResume":   flux.Error[int](errBoom).OnErrorResume(func(error) flux.Flux[int] { panic("boom") }),
		"TakeUntil":       src.TakeUntil(alwaysTrue),
		"Scan":            flux.Scan(src, 0, func(int, int) int { panic("boom") }),
		"Reduce":          flux.Reduce(src, 0, func(int, int) int { panic("boom") }),
		"ConcatMap":       flux.ConcatMap(src, func(int) flux.Flux[int] { panic("boom") }),
		"ConcatMap inner": flux.ConcatMap(src, func(v int) flux.Flux[int] { return flux.Map(flux.Just(v), boom[int]) }),
		"FlatMap":         flux.FlatMap(src, func(int) flux.Flux[int] { panic("boom") }, 2),
		"FlatMap inner":   flux.FlatMap(src, func(v int) flux.Flux[int] { return flux.Map(flux.Just(v), boom[int]) }, 2),
		"GroupBy key": flux.FlatMap(flux.GroupBy(src, func(int) int { panic("boom") }, 2),
			func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }, 2),
		"after PublishOn":   flux.Map(src.PublishOn(s, 2), boom[int]),
		"under SubscribeOn": flux.Map(src, boom[int]).SubscribeOn(s),
		"Defer":             flux.Defer(func() flux.Flux[int] { panic("boom") }),
		"Create":            flux.Create(func(context.Context, flux.Sink[int]) error { panic("boom") }),
		"FromSeq":           flux.FromSeq(func(func(int) bool) { panic("boom") }),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := f.Subscribe(t.Context(), func(int) error { return nil })
			var pe *flux.PanicError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "boom", pe.Value)
			require.NotEmpty(t, pe.Stack)
		})
	}
	t.Run("onNext", func(t *testing.T) {
		var pe *flux.PanicError
		err := src.PublishOn(s, 1).Subscribe(t.Context(), func(int) error { panic("boom") })
		require.ErrorAs(t, err, &pe)
	})
	t.Run("panic(err) keeps the error visible", func(t *testing.T) {
		err := flux.Map(src, func(int) int { panic(errBoom) }).Subscribe(t.Context(), func(int) error { return nil })
		require.ErrorIs(t, err, errBoom)
	})
	t.Run("discard hook is ignored", func(t *testing.T) {
		err := flux.DoOnDiscard(flux.Buffer(flux.Error[int](errBoom).OnErrorResume(func(error) flux.Flux[int] {
			return flux.Create(func(_ context.Context, s flux.Sink[int]) error { _ = s.Next(1); return errBoom })
		}), 3), func(int, error) { panic("boom") }).Subscribe(t.Context(), func([]int) error { return nil })
		require.ErrorIs(t, err, errBoom)
	})
}

// A panic in the body of a range loop over All is the caller's own: it
// propagates, but the subscription's goroutine is cancelled and joined first.
func TestAllBodyPanicJoins(t *testing.T) {
	leakFree(t)
	s := newParallel(t, 1)
	defer func() { require.Equal(t, "body", recover()) }()
	for range flux.Range(0, 100).PublishOn(s, 4).All(t.Context()) {
		panic("body")
	}
}
