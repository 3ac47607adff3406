package testkit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// ExpectNoEvent's window is [0, d): an item exactly at d belongs to the
// next step, one a nanosecond earlier fails it. Virtual time: the hour
// passes at once and exactly.
func TestExpectNoEventWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		testkit.Verify(t, ticks(1, time.Hour)).ExpectNoEvent(time.Hour).ExpectNext(0).ExpectComplete().VerifyT()
		require.Equal(t, time.Hour, time.Since(start))

		err := testkit.Verify(t, ticks(1, time.Hour)).ExpectNoEvent(time.Hour + time.Nanosecond).ExpectNext(0).ExpectComplete().Verify(t.Context())
		failsAt(t, err, 0, "got onNext(0), expected no signal within 1h0m0.000000001s")
	})
}

// Any signal inside the window fails it: an item, the completion, an
// error, or an item already there when the window opens.
func TestExpectNoEventFails(t *testing.T) {
	cases := map[string]struct {
		v     *testkit.Verifier[int]
		index int
		want  string
	}{
		"item":        {testkit.Verify(t, ticks(3, time.Minute)).ExpectNoEvent(time.Hour).ExpectNextCount(3).ExpectComplete(), 0, "got onNext(0), expected no signal within 1h0m0s"},
		"completion":  {testkit.Verify(t, after(time.Minute, nil)).ExpectNoEvent(time.Hour).ExpectComplete(), 0, "got onComplete, expected no signal within 1h0m0s"},
		"error":       {testkit.Verify(t, after(time.Minute, errBoom)).ExpectNoEvent(time.Hour).ExpectError(), 0, "got onError(boom), expected no signal"},
		"at once":     {testkit.Verify(t, flux.Just(7)).ExpectNoEvent(time.Hour).ExpectNext(7).ExpectComplete(), 0, "got onNext(7), expected no signal"},
		"after items": {testkit.Verify(t, ticks(3, time.Minute)).ExpectNext(0).ExpectNoEvent(time.Hour).ExpectNext(1, 2).ExpectComplete(), 1, "got onNext(1), expected no signal"},
		// Items that arrived during a ThenAwait are there when the window opens.
		"after await": {testkit.Verify(t, ticks(3, time.Hour)).ThenAwait(90 * time.Minute).ExpectNoEvent(time.Hour).ExpectNextCount(3).ExpectComplete(), 0, "got onNext(0), expected no signal"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failsAt(t, c.v.Verify(t.Context()), c.index, c.want) })
		})
	}
}

// ThenAwait does not hold the Flux: three hourly ticks all arrive during a
// three-hour wait, and the script ends at three hours (a held Flux would
// take five).
func TestThenAwaitTakesWhatArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		testkit.Verify(t, ticks(3, time.Hour)).ThenAwait(3*time.Hour).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
		require.Equal(t, 3*time.Hour, time.Since(start))

		// Reactor's interval pattern: nothing for an hour, then one tick per hour.
		start = time.Now()
		testkit.Verify(t, ticks(3, time.Hour)).
			ExpectNoEvent(time.Hour).ExpectNext(0).
			ThenAwait(time.Hour).ExpectNext(1).
			ExpectNoEvent(time.Hour).ExpectNext(2).
			ExpectComplete().VerifyT()
		require.Equal(t, 3*time.Hour, time.Since(start))
	})
}

// An endless synchronous Flux does not keep the bubble's clock from moving
// during a ThenAwait: beyond a bounded backlog it waits in emit.
func TestThenAwaitBoundsTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pulled atomic.Int64
		src := flux.Range(0, 1<<30).DoOnNext(func(int) { pulled.Add(1) })
		testkit.Verify(t, src).ThenAwait(time.Hour).ExpectNext(0, 1).ThenCancel().VerifyT()
		require.Less(t, pulled.Load(), int64(1<<10))
	})
}

// ExpectTimeout: nothing within d, then the cancel, which must end the flow.
func TestExpectTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// DefaultTimeout is 10s: VerifyT's deadline covers the script's own waits.
		testkit.Verify(t, never()).ExpectTimeout(time.Hour).VerifyT()
		require.Equal(t, time.Hour, time.Since(start))
		// The next tick is due exactly when the window closes: the cancel wins.
		// The first takes an hour to come: that wait is the Timeout's.
		testkit.Verify(t, ticks(2, time.Hour)).ExpectNext(0).ExpectTimeout(time.Hour).Timeout(2 * time.Hour).VerifyT()
	})
	ignoresCancel := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		return errBoom
	})
	cases := map[string]struct {
		v     *testkit.Verifier[int]
		index int
		want  string
	}{
		"item within":    {testkit.Verify(t, ticks(1, time.Minute)).ExpectTimeout(time.Hour), 0, "got onNext(0), expected no signal within 1h0m0s, then cancel"},
		"end within":     {testkit.Verify(t, after(time.Minute, nil)).ExpectTimeout(time.Hour), 0, "got onComplete, expected no signal within 1h0m0s, then cancel"},
		"not cancelable": {testkit.Verify(t, ignoresCancel).ExpectTimeout(time.Hour), 0, "got onError(boom) after the cancel, expected the cancellation"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failsAt(t, c.v.Verify(t.Context()), c.index, c.want) })
		})
	}
}

// The caller's context bounds the time steps too.
func TestTimeStepsEndWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		err := testkit.Verify(t, never()).ThenAwait(2 * time.Hour).ThenCancel().Verify(ctx)
		require.ErrorIs(t, err, testkit.ErrExpectation)
		require.ErrorContains(t, err, "the context ended (context deadline exceeded) during thenAwait(2h0m0s)")

		ctx, cancel = context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		err = testkit.Verify(t, never()).ExpectNoEvent(2 * time.Hour).ThenCancel().Verify(ctx)
		require.ErrorContains(t, err, "the context ended (context deadline exceeded) during no signal within 2h0m0s")

		// Timeout, not the script's waits, bounds a wait for a signal.
		rec := &recordingTB{TB: t}
		testkit.Verify[int](rec, never()).ThenAwait(time.Hour).ExpectNext(1).ExpectComplete().Timeout(time.Minute).VerifyT()
		require.True(t, rec.failed)
		require.Contains(t, rec.msg, "signal 0: got no signal before the context ended (context deadline exceeded), expected onNext(1)")
	})
}

// Outside a bubble the time steps wait in real time.
func TestTimeStepsInRealTime(t *testing.T) {
	start := time.Now()
	testkit.Verify(t, never()).ExpectNoEvent(time.Millisecond).ThenAwait(time.Millisecond).ExpectTimeout(time.Millisecond).VerifyT()
	require.GreaterOrEqual(t, time.Since(start), 3*time.Millisecond)
}
