package flux_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// flaky emits 1, 2 and then fails on its first fails subscriptions, and
// emits 1, 2, 3 and completes on the later ones; *subs counts them.
func flaky(fails int, subs *int) flux.Flux[int] {
	return flux.Defer(func() flux.Flux[int] {
		*subs++
		if *subs <= fails {
			return flux.Concat(flux.Just(1, 2), flux.Error[int](errBoom))
		}
		return flux.Just(1, 2, 3)
	})
}

func TestRetry(t *testing.T) {
	subs := 0
	// Each attempt's items are emitted again (Reactor's retry re-subscribes).
	testkit.Verify(t, flaky(2, &subs).Retry(2)).ExpectNext(1, 2, 1, 2, 1, 2, 3).ExpectComplete().VerifyT()
	require.Equal(t, 3, subs)
	subs = 0
	testkit.Verify(t, flaky(3, &subs).Retry(2)).ExpectNext(1, 2, 1, 2, 1, 2).ExpectErrorIs(errBoom).VerifyT()
	require.Equal(t, 3, subs, "n retries: n+1 subscriptions")
	subs = 0
	testkit.Verify(t, flaky(1, &subs).Retry(0)).ExpectNext(1, 2).ExpectErrorIs(errBoom).VerifyT()
	subs = 0
	testkit.Verify(t, flaky(0, &subs).Retry(5)).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	require.Equal(t, 1, subs)
	// A cancellation is not retried.
	subs = 0
	testkit.Verify(t, flaky(5, &subs).Retry(5).Take(1)).ExpectNext(1).ExpectComplete().VerifyT()
	require.Equal(t, 1, subs)
	subs = 0
	err := flaky(5, &subs).Retry(5).Subscribe(t.Context(), func(int) error { return errStop })
	require.ErrorIs(t, err, errStop)
	require.Equal(t, 1, subs)
	subs = 0
	ctx, cancel := context.WithCancel(t.Context())
	err = flaky(5, &subs).Retry(5).Subscribe(ctx, func(v int) error {
		if v == 2 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, subs)
	// A panic is an error like another.
	panics := 0
	testkit.Verify(t, flux.Map(flux.Just(1), func(v int) int {
		if panics++; panics < 3 {
			panic("boom")
		}
		return v
	}).Retry(2)).ExpectNext(1).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(1).Retry(-1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

func TestOnErrorReturn(t *testing.T) {
	testkit.Verify(t, failing.OnErrorReturn(-1)).ExpectNextCount(10).ExpectNext(-1).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(1, 2).OnErrorReturn(-1)).ExpectNext(1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Empty[int]().OnErrorReturn(-1)).ExpectComplete().VerifyT()
	// A cancellation is not replaced.
	err := flux.Just(1, 2).OnErrorReturn(-1).Subscribe(t.Context(), func(int) error { return errStop })
	require.ErrorIs(t, err, errStop)
	testkit.Verify(t, endless.OnErrorReturn(-1).Take(2)).ExpectNext(0, 1).ExpectComplete().VerifyT()
}

func TestOnErrorMap(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("wrapped: %w", err) }
	testkit.Verify(t, failing.OnErrorMap(wrap)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	_, err := flux.Collect(t.Context(), failing.OnErrorMap(wrap))
	require.EqualError(t, err, "wrapped: boom")
	testkit.Verify(t, flux.Error[int](errBoom).OnErrorMap(func(error) error { return errBoom2 })).ExpectErrorIs(errBoom2).VerifyT()
	testkit.Verify(t, flux.Just(1).OnErrorMap(wrap)).ExpectNext(1).ExpectComplete().VerifyT()
	// nil keeps the error; a panic is joined to it.
	testkit.Verify(t, flux.Error[int](errBoom).OnErrorMap(func(error) error { return nil })).ExpectErrorIs(errBoom).VerifyT()
	err = flux.Error[int](errBoom).OnErrorMap(func(error) error { panic("boom") }).Subscribe(t.Context(), func(int) error { return nil })
	var pe *flux.PanicError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, errBoom)
	// A cancellation is not mapped.
	err = flux.Just(1).OnErrorMap(wrap).Subscribe(t.Context(), func(int) error { return errStop })
	require.Equal(t, errStop, err)
	testkit.Verify(t, flux.Just(1).OnErrorMap(nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

// resumed records what OnErrorContinue handed over.
type resumed struct {
	items []int
	errs  []error
}

func (r *resumed) take(err error, v int) {
	r.items = append(r.items, v)
	r.errs = append(r.errs, err)
}

func panicsOn(bad int) func(int) int {
	return func(v int) int {
		if v == bad {
			panic(fmt.Sprint("bad ", v))
		}
		return v
	}
}

func TestOnErrorContinue(t *testing.T) {
	src := flux.Range(1, 4) // 1..4, 2 is bad
	bad := panicsOn(2)
	cases := map[string]flux.Flux[int]{
		"Map":      flux.Map(src, bad),
		"Filter":   src.Filter(func(v int) bool { return bad(v) > 0 }),
		"DoOnNext": src.DoOnNext(func(v int) { bad(v) }),
		"DistinctBy": flux.DistinctBy(src, func(v int) int {
			return bad(v)
		}),
		"DistinctUntilChangedBy": flux.DistinctUntilChangedBy(src, bad),
		"ConcatMap":              flux.ConcatMap(src, func(v int) flux.Flux[int] { return flux.Just(bad(v)) }),
		"FlatMap":                flux.FlatMap(src, func(v int) flux.Flux[int] { return flux.Just(bad(v)) }, 1),
		"SwitchMap":              flux.SwitchMap(src, func(v int) flux.Flux[int] { return flux.Just(bad(v)) }),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			var r resumed
			got, err := flux.Collect(t.Context(), flux.OnErrorContinue(f, r.take))
			require.NoError(t, err)
			if name != "SwitchMap" { // its inners may be switched away from
				require.Equal(t, []int{1, 3, 4}, got)
			}
			require.Equal(t, []int{2}, r.items)
			var pe *flux.PanicError
			require.ErrorAs(t, r.errs[0], &pe)
			require.Equal(t, "bad 2", pe.Value)

			// Without it, the same failure ends the flow.
			_, err = flux.Collect(t.Context(), f)
			require.ErrorAs(t, err, &pe)
		})
	}
	t.Run("the item type selects", func(t *testing.T) {
		// A handler for strings does not resume a failure on an int.
		var strs []string
		_, err := flux.Collect(t.Context(), flux.OnErrorContinue(flux.Map(src, bad), func(_ error, v string) { strs = append(strs, v) }))
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		require.Empty(t, strs)
		// Both Maps take ints, so the handler for ints resumes both, and the
		// one for strings neither.
		var ints resumed
		toStr := flux.Map(flux.Map(src, bad), func(v int) string {
			if v == 3 {
				panic("three")
			}
			return fmt.Sprint(v)
		})
		got, err := flux.Collect(t.Context(), flux.OnErrorContinue(flux.OnErrorContinue(toStr, ints.take), func(_ error, v string) {
			strs = append(strs, v)
		}))
		require.NoError(t, err)
		require.Equal(t, []string{"1", "4"}, got)
		require.Equal(t, []int{2, 3}, ints.items)
		require.Empty(t, strs)
	})
	t.Run("not resumed", func(t *testing.T) {
		// Errors of sources, inners and the downstream still end the flow.
		var r resumed
		testkit.Verify(t, flux.OnErrorContinue(failing, r.take)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
		inner := flux.ConcatMap(src, func(v int) flux.Flux[int] {
			if v == 2 {
				return flux.Error[int](errBoom)
			}
			return flux.Just(v)
		})
		testkit.Verify(t, flux.OnErrorContinue(inner, r.take)).ExpectNext(1).ExpectErrorIs(errBoom).VerifyT()
		err := flux.OnErrorContinue(src, r.take).Subscribe(t.Context(), func(int) error { return errStop })
		require.ErrorIs(t, err, errStop)
		require.Empty(t, r.items)
		// A fused operator inside an inner is upstream too.
		inner = flux.ConcatMap(src, func(v int) flux.Flux[int] { return flux.Map(flux.Just(v), bad) })
		testkit.Verify(t, flux.OnErrorContinue(inner, r.take)).ExpectNext(1, 3, 4).ExpectComplete().VerifyT()
		require.Equal(t, []int{2}, r.items)
	})
	t.Run("handler panics", func(t *testing.T) {
		err := flux.OnErrorContinue(flux.Map(src, bad), func(error, int) { panic("handler") }).Subscribe(t.Context(), func(int) error { return nil })
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		require.ErrorContains(t, err, "bad 2")
		require.ErrorContains(t, err, "handler")
	})
	t.Run("inner takes precedence", func(t *testing.T) {
		var inner, outer resumed
		got, err := flux.Collect(t.Context(), flux.OnErrorContinue(flux.OnErrorContinue(flux.Map(src, bad), inner.take), outer.take))
		require.NoError(t, err)
		require.Equal(t, []int{1, 3, 4}, got)
		require.Equal(t, []int{2}, inner.items)
		require.Empty(t, outer.items)
	})
	testkit.Verify(t, flux.OnErrorContinue[int, int](src, nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

func ExampleFlux_Retry() {
	attempts := 0
	f := flux.Defer(func() flux.Flux[int] {
		if attempts++; attempts < 3 {
			return flux.Error[int](errors.New("unavailable"))
		}
		return flux.Just(attempts)
	})
	got, err := flux.Collect(context.Background(), f.Retry(5))
	fmt.Println(got, err)
	// Output: [3] <nil>
}

func ExampleFlux_OnErrorReturn() {
	f := flux.Concat(flux.Just(1, 2), flux.Error[int](errors.New("lost")))
	got, err := flux.Collect(context.Background(), f.OnErrorReturn(0))
	fmt.Println(got, err)
	// Output: [1 2 0] <nil>
}

func ExampleFlux_OnErrorMap() {
	f := flux.Error[int](errors.New("connection reset"))
	_, err := flux.Collect(context.Background(), f.OnErrorMap(func(err error) error {
		return fmt.Errorf("fetching prices: %w", err)
	}))
	fmt.Println(err)
	// Output: fetching prices: connection reset
}

func ExampleOnErrorContinue() {
	parsed := flux.Map(flux.Just("1", "x", "3"), func(s string) int {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil {
			panic(err)
		}
		return n
	})
	got, err := flux.Collect(context.Background(), flux.OnErrorContinue(parsed, func(err error, s string) {
		fmt.Printf("skipped %q\n", s)
	}))
	fmt.Println(got, err)
	// Output:
	// skipped "x"
	// [1 3] <nil>
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
