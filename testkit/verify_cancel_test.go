package testkit_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// ThenCancel with no step before it subscribes the Flux, then cancels it:
// the Flux runs, with its context cancelled, and must end by that.
func TestThenCancelAtOnceSubscribes(t *testing.T) {
	var subs atomic.Int32
	var sawCancel atomic.Bool
	f := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		sawCancel.Store(true)
		return context.Cause(ctx)
	})
	require.NoError(t, testkit.Verify(t, subscribedTo(f, &subs)).ThenCancel().Verify(t.Context()))
	require.Equal(t, int32(1), subs.Load())
	require.True(t, sawCancel.Load())

	subs.Store(0)
	require.NoError(t, testkit.Verify(t, subscribedTo(flux.Range(0, 1<<30), &subs)).ThenCancel().Verify(t.Context()))
	require.Equal(t, int32(1), subs.Load())
}

// What the Flux does once subscribed counts: a flow that ends by itself
// before the cancel, or with an error of its own after it, fails the script.
func TestThenCancelChecksTheFlow(t *testing.T) {
	ignoresCancel := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		return errBoom
	})
	panics := flux.Map(flux.Just(1), func(int) int { panic("boom") })
	cases := map[string]struct {
		v     *testkit.Verifier[int]
		index int
		want  string
	}{
		"fails at once":     {testkit.Verify(t, flux.Error[int](errBoom)).ThenCancel(), 0, "got onError(boom) after the cancel, expected the cancellation"},
		"completes at once": {testkit.Verify(t, flux.Empty[int]()).ThenCancel(), 0, "got onComplete after the cancel"},
		"other error":       {testkit.Verify(t, ignoresCancel).ThenCancel(), 0, "got onError(boom) after the cancel"},
		"ended before":      {testkit.Verify(t, flux.Just(1, 2)).ThenConsumeWhile(func(int) bool { return true }).ThenCancel(), 2, "got onComplete, expected cancel"},
		"failed before":     {testkit.Verify(t, flux.Error[int](errBoom)).ExpectNoEvent(1).ThenCancel(), 0, "got onError(boom), expected no signal"},
		"value steps first": {testkit.Verify(t, flux.Just(1)).ExpectNext(2).ThenCancel(), 0, "got onNext(1), expected onNext(2)"},
		"too few before":    {testkit.Verify(t, flux.Just(1)).ExpectNext(1, 2).ThenCancel(), 1, "got onComplete, expected onNext(2)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { failsAt(t, c.v.Verify(t.Context()), c.index, c.want) })
	}
	// A Flux that would panic is cancelled before it starts.
	require.NoError(t, testkit.Verify(t, panics).ThenCancel().Verify(t.Context()))
}

// The cancel is the answer to the emit of the last item expected: a
// synchronous source pulls nothing more, and a flow that would have
// completed right after it is still cancelled.
func TestThenCancelStopsAtTheLastItem(t *testing.T) {
	var pulled atomic.Int64
	src := flux.Range(0, 1<<30).DoOnNext(func(int) { pulled.Add(1) })
	require.NoError(t, testkit.Verify(t, src).ExpectNext(0, 1).ThenCancel().Verify(t.Context()))
	require.Equal(t, int64(2), pulled.Load())
	require.NoError(t, testkit.Verify(t, flux.Just(1, 2)).ExpectNext(1, 2).ThenCancel().Verify(t.Context()))
}
