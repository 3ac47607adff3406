package flux_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

var errBoom = errors.New("boom")

func double(v int) int { return 2 * v }

func TestSources(t *testing.T) {
	testkit.Verify(t, flux.Just(1, 2, 3)).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.FromSlice([]string{"a", "b"})).ExpectNext("a", "b").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Range(5, 3)).ExpectNext(5, 6, 7).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Range(0, -1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.Empty[int]()).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Flux[int]{}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Error[int](errBoom)).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Error[int](nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.FromSeq(slices.Values([]int{4, 5}))).ExpectNext(4, 5).ExpectComplete().VerifyT()

	ch := make(chan int, 3)
	ch <- 1
	ch <- 2
	close(ch)
	testkit.Verify(t, flux.FromChannel(ch)).ExpectNext(1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.FromChannel[int](nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()

	calls := 0
	d := flux.Defer(func() flux.Flux[int] { calls++; return flux.Just(calls) })
	testkit.Verify(t, d).ExpectNext(1).ExpectComplete().VerifyT()
	testkit.Verify(t, d).ExpectNext(2).ExpectComplete().VerifyT()
}

func TestCreate(t *testing.T) {
	f := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i := range 5 {
			if err := s.Next(i); err != nil {
				return err
			}
		}
		return nil
	})
	testkit.Verify(t, f).ExpectNext(0, 1, 2, 3, 4).ExpectComplete().VerifyT()
	// Take stops the producer: Next reports the subscriber gone and the
	// flow completes, whatever the function returns.
	var nextErr error
	g := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i := 0; ; i++ {
			if nextErr = s.Next(i); nextErr != nil {
				return errBoom
			}
		}
	})
	testkit.Verify(t, g.Take(2)).ExpectNext(0, 1).ExpectComplete().VerifyT()
	require.Error(t, nextErr)

	var kept flux.Sink[int]
	h := flux.Create(func(ctx context.Context, s flux.Sink[int]) error { kept = s; return errBoom })
	testkit.Verify(t, h).ExpectErrorIs(errBoom).VerifyT()
	require.ErrorIs(t, kept.Next(1), flux.ErrCancelled, "a sink used after its function returned")
}

// Sink.Next tells an item that never reached the downstream (an error
// wrapping ErrNotDelivered and the reason) from one handed to it after which
// the downstream stopped or failed (its own error).
func TestSinkNextTellsNotDelivered(t *testing.T) {
	var errs []error
	three := flux.Create(func(_ context.Context, s flux.Sink[int]) error {
		for i := range 3 {
			errs = append(errs, s.Next(i))
		}
		return nil
	})
	got, err := flux.Collect(t.Context(), three.Take(1))
	require.NoError(t, err)
	require.Equal(t, []int{0}, got)
	require.Error(t, errs[0], "delivered, then Take stopped")
	require.NotErrorIs(t, errs[0], flux.ErrNotDelivered)
	require.ErrorIs(t, errs[1], flux.ErrNotDelivered)
	require.ErrorIs(t, errs[2], flux.ErrNotDelivered)

	errs = nil
	err = three.Subscribe(t.Context(), func(v int) error { return errBoom })
	require.ErrorIs(t, err, errBoom)
	require.ErrorIs(t, errs[0], errBoom, "delivered, then the subscriber failed")
	require.NotErrorIs(t, errs[0], flux.ErrNotDelivered)
	require.ErrorIs(t, errs[1], flux.ErrNotDelivered)
	require.ErrorIs(t, errs[1], errBoom, "the reason is kept")

	ctx, cancel := context.WithCancel(t.Context())
	var nextErr error
	err = flux.Create(func(_ context.Context, s flux.Sink[int]) error {
		cancel()
		nextErr = s.Next(1)
		return nil
	}).Subscribe(ctx, func(int) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, nextErr, flux.ErrNotDelivered)
	require.ErrorIs(t, nextErr, context.Canceled)

	var kept flux.Sink[int]
	require.NoError(t, flux.Create(func(_ context.Context, s flux.Sink[int]) error { kept = s; return nil }).
		Subscribe(t.Context(), func(int) error { return nil }))
	require.ErrorIs(t, kept.Next(1), flux.ErrNotDelivered, "after the function returned")
}

func TestSynchronousOperators(t *testing.T) {
	src := flux.Range(1, 10)
	testkit.Verify(t, flux.Map(src, double)).ExpectNext(2, 4, 6).ExpectNextCount(7).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Filter(func(v int) bool { return v%3 == 0 })).ExpectNext(3, 6, 9).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Take(2)).ExpectNext(1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Take(0)).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Take(20)).ExpectNextCount(10).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Take(-1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, src.Skip(8)).ExpectNext(9, 10).ExpectComplete().VerifyT()
	testkit.Verify(t, src.Skip(-1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, src.TakeUntil(func(v int) bool { return v == 3 })).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Scan(src.Take(3), 0, func(a, v int) int { return a + v })).ExpectNext(0, 1, 3, 6).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Reduce(src, 0, func(a, v int) int { return a + v })).ExpectNext(55).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Reduce(flux.Empty[int](), 7, func(a, v int) int { return a + v })).ExpectNext(7).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Buffer(src, 4)).ExpectNext([]int{1, 2, 3, 4}, []int{5, 6, 7, 8}, []int{9, 10}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Buffer(src, 0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.ConcatMap(src.Take(3), func(v int) flux.Flux[int] { return flux.Just(v, -v) })).
		ExpectNext(1, -1, 2, -2, 3, -3).ExpectComplete().VerifyT()

	var seen []int
	testkit.Verify(t, src.DoOnNext(func(v int) { seen = append(seen, v) }).Take(2)).ExpectNext(1, 2).ExpectComplete().VerifyT()
	require.Equal(t, []int{1, 2}, seen)
}

// Take and TakeUntil deep inside a ConcatMap inner and after it stop exactly
// where they should: a satisfied inner Take completes only its inner, the
// outer Take stops the whole flow.
func TestNestedStops(t *testing.T) {
	inners := 0
	f := flux.ConcatMap(flux.Range(0, 100), func(v int) flux.Flux[int] {
		inners++
		return flux.Range(v*10, 10).Take(2)
	}).Take(3)
	testkit.Verify(t, f).ExpectNext(0, 1, 10).ExpectComplete().VerifyT()
	require.Equal(t, 2, inners, "the outer Take must not let ConcatMap start another inner")

	g := flux.ConcatMap(flux.Range(0, 100), func(v int) flux.Flux[int] { return flux.Range(v*10, 2).Take(2) }).Take(2)
	inners = 0
	testkit.Verify(t, g.DoOnNext(func(int) { inners++ })).ExpectNext(0, 1).ExpectComplete().VerifyT()
	require.Equal(t, 2, inners)
}

// A panicking TakeUntil predicate still lets its item through before the
// error (Reactor §1.10).
func TestTakeUntilPanicEmitsTheItemFirst(t *testing.T) {
	f := flux.Range(0, 5).TakeUntil(func(v int) bool {
		if v == 2 {
			panic("boom")
		}
		return false
	})
	var pe *flux.PanicError
	testkit.Verify(t, f).ExpectNext(0, 1, 2).ExpectError().VerifyT()
	got, err := flux.Collect(t.Context(), f)
	require.Equal(t, []int{0, 1, 2}, got)
	require.ErrorAs(t, err, &pe)
}

func TestErrorsFollowTheirItems(t *testing.T) {
	f := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		_ = s.Next(1)
		_ = s.Next(2)
		return errBoom
	})
	testkit.Verify(t, flux.Map(f, double)).ExpectNext(2, 4).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Buffer(f, 5)).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, f.OnErrorResume(func(err error) flux.Flux[int] { return flux.Just(9) })).ExpectNext(1, 2, 9).ExpectComplete().VerifyT()

	var got error
	testkit.Verify(t, f.DoOnError(func(err error) { got = err })).ExpectNext(1, 2).ExpectErrorIs(errBoom).VerifyT()
	require.ErrorIs(t, got, errBoom)
}

// A cancellation from downstream is not an upstream error: DoOnError and
// OnErrorResume do not see it.
func TestCancelIsNotAnError(t *testing.T) {
	hooked, resumed := false, false
	f := flux.Range(0, 10).
		DoOnError(func(error) { hooked = true }).
		OnErrorResume(func(error) flux.Flux[int] { resumed = true; return flux.Empty[int]() })
	err := f.Subscribe(t.Context(), func(v int) error {
		if v == 3 {
			return errBoom
		}
		return nil
	})
	require.ErrorIs(t, err, errBoom)
	require.False(t, hooked)
	require.False(t, resumed)
}

func TestDoFinallyOncePerSignal(t *testing.T) {
	cases := []struct {
		name string
		f    func(flux.Flux[int]) flux.Flux[int]
		src  flux.Flux[int]
		on   func(int) error
		want flux.Signal
	}{
		{"complete", nil, flux.Range(0, 3), nil, flux.SignalComplete},
		{"error", nil, flux.Error[int](errBoom), nil, flux.SignalError},
		{"onNext error", nil, flux.Range(0, 3), func(int) error { return errBoom }, flux.SignalCancel},
		{"take", func(f flux.Flux[int]) flux.Flux[int] { return f.Take(1) }, flux.Range(0, 3), nil, flux.SignalCancel},
		{"map panic", func(f flux.Flux[int]) flux.Flux[int] { return flux.Map(f, func(int) int { panic("x") }) }, flux.Range(0, 3), nil, flux.SignalCancel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []flux.Signal
			f := c.src.DoFinally(func(s flux.Signal) { got = append(got, s) })
			if c.f != nil {
				f = c.f(f)
			}
			on := c.on
			if on == nil {
				on = func(int) error { return nil }
			}
			_ = f.Subscribe(t.Context(), on)
			require.Equal(t, []flux.Signal{c.want}, got)
		})
	}
	t.Run("ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var got []flux.Signal
		f := flux.Range(0, 10).DoFinally(func(s flux.Signal) { got = append(got, s) })
		err := f.Subscribe(ctx, func(v int) error {
			if v == 2 {
				cancel()
			}
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []flux.Signal{flux.SignalCancel}, got)
	})
	require.Equal(t, "complete", flux.SignalComplete.String())
	require.Equal(t, "error", flux.SignalError.String())
	require.Equal(t, "cancel", flux.SignalCancel.String())
	require.Equal(t, "Signal(7)", flux.Signal(7).String())
}

func TestInvalidArguments(t *testing.T) {
	src := flux.Just(1)
	bad := map[string]flux.Flux[int]{
		"Map":            flux.Map[int, int](src, nil),
		"Filter":         src.Filter(nil),
		"DoOnNext":       src.DoOnNext(nil),
		"DoOnError":      src.DoOnError(nil),
		"DoOnComplete":   src.DoOnComplete(nil),
		"DoFinally":      src.DoFinally(nil),
		"OnErrorResume":  src.OnErrorResume(nil),
		"TakeUntil":      src.TakeUntil(nil),
		"Scan":           flux.Scan[int, int](src, 0, nil),
		"Reduce":         flux.Reduce[int, int](src, 0, nil),
		"ConcatMap":      flux.ConcatMap[int, int](src, nil),
		"FlatMap":        flux.FlatMap[int, int](src, nil, 1),
		"FlatMap c":      flux.FlatMap(src, func(v int) flux.Flux[int] { return flux.Just(v) }, 0),
		"PublishOn nil":  src.PublishOn(nil, 1),
		"SubscribeOn":    src.SubscribeOn(nil),
		"Defer":          flux.Defer[int](nil),
		"Create":         flux.Create[int](nil),
		"FromSeq":        flux.FromSeq[int](nil),
		"FromObservable": flux.FromObservable[int](nil),
	}
	for name, f := range bad {
		t.Run(name, func(t *testing.T) {
			testkit.Verify(t, f).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
		})
	}
	require.ErrorIs(t, src.Subscribe(t.Context(), nil), flux.ErrInvalidArgument)
}
