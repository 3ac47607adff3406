package flux_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
)

// exitAt is a Map function that calls runtime.Goexit (t.FailNow in a
// handler under test) on the item at.
func exitAt(at int) func(int) int {
	return func(v int) int {
		if v == at {
			runtime.Goexit()
		}
		return v
	}
}

// ended runs fn on a goroutine of its own and returns its result, failing
// the test if fn has not returned within a generous bound: what is tested
// here is that it returns at all, instead of hanging.
func ended(t *testing.T, fn func() error) error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- fn() }()
	select {
	case err := <-res:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end")
		return nil
	}
}

// A runtime.Goexit in a user function that runs on a goroutine the operator
// started (an inner of FlatMap, the upstream of Window or of All's
// subscription) ends the flow with a *PanicError wrapping
// schedulers.ErrGoexit, as it does for Merge, Zip, SwitchMap and PublishOn:
// it neither completes the flow without the item nor leaves it hanging.
func TestGoexitOnOperatorGoroutine(t *testing.T) {
	cases := map[string]flux.Flux[int]{
		"FlatMap inner": flux.FlatMap(flux.Range(0, 5), func(v int) flux.Flux[int] {
			return flux.Map(flux.Just(v), exitAt(2))
		}, 2),
		"Window upstream": flux.ConcatMap(flux.Window(flux.Map(flux.Range(0, 5), exitAt(2)), 2),
			func(w flux.Flux[int]) flux.Flux[int] { return w }),
		"WindowTimeout upstream": flux.ConcatMap(flux.WindowTimeout(flux.Map(flux.Range(0, 5), exitAt(3)), 2, time.Hour),
			func(w flux.Flux[int]) flux.Flux[int] { return w }),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			leakFree(t)
			err := ended(t, func() error { return f.Subscribe(t.Context(), func(int) error { return nil }) })
			require.ErrorIs(t, err, schedulers.ErrGoexit)
			var pe *flux.PanicError
			require.ErrorAs(t, err, &pe)
		})
	}
	t.Run("All upstream", func(t *testing.T) {
		leakFree(t)
		var got []int
		err := ended(t, func() error {
			for v, err := range flux.Map(flux.Range(0, 5), exitAt(2)).All(t.Context()) {
				if err != nil {
					return err
				}
				got = append(got, v)
			}
			return nil
		})
		require.ErrorIs(t, err, schedulers.ErrGoexit)
		require.Equal(t, []int{0, 1}, got)
	})
}

// A subscriber of a ManySink or of a RefCount connection whose onNext calls
// runtime.Goexit leaves as one whose onNext failed does: it is detached, so
// that the multicast sink does not count it, the unicast sink is cancelled,
// and the connection's upstream is cancelled and joined once it was the
// last subscriber.
func TestSinkSubscriberGoexit(t *testing.T) {
	exiting := func(f flux.Flux[int]) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = f.Subscribe(context.Background(), func(int) error { runtime.Goexit(); return nil })
		}()
		<-done
	}
	t.Run("multicast", func(t *testing.T) {
		leakFree(t)
		s, err := flux.NewMulticastSink[int](4)
		require.NoError(t, err)
		require.Equal(t, flux.EmitOK, s.TryEmitNext(0)) // warm: kept for the first subscriber
		exiting(s.AsFlux())
		require.Zero(t, s.CurrentSubscriberCount(), "the subscriber that exited is still attached")
		for i := 1; i <= 4; i++ {
			require.Equal(t, flux.EmitOK, s.TryEmitNext(i))
		}
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		// Alone again, the next subscriber starts with what the last one
		// left.
		got, err := flux.Collect(t.Context(), s.AsFlux())
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4}, got)
	})
	t.Run("unicast", func(t *testing.T) {
		leakFree(t)
		s, err := flux.NewUnicastSink[int](4)
		require.NoError(t, err)
		require.Equal(t, flux.EmitOK, s.TryEmitNext(0))
		require.Equal(t, flux.EmitOK, s.TryEmitNext(1))
		var discarded []int
		exiting(flux.DoOnDiscard(s.AsFlux(), func(v int, _ error) { discarded = append(discarded, v) }))
		require.Equal(t, flux.EmitFailCancelled, s.TryEmitNext(2))
		require.Equal(t, []int{1}, discarded, "the item not taken goes to the discard hook")
	})
	t.Run("RefCount", func(t *testing.T) {
		leakFree(t)
		shared := flux.Range(0, 10).Publish(2).RefCount(1)
		exiting(shared)
		// The connection it was the last of is gone: the next subscriber
		// opens a new one.
		var got []int
		err := ended(t, func() (err error) {
			got, err = flux.Collect(t.Context(), shared)
			return err
		})
		require.NoError(t, err)
		require.Equal(t, seq(10), got)
	})
}
