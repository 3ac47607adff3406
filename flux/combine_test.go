package flux_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var errBoom2 = errors.New("boom 2")

// ledger accounts for the items of one subscription: pulled (handed by a
// source to the operator under test), used (reached the subscriber, or the
// combinator of Zip, CombineLatest, SwitchMap) and discarded (given to the
// hook). Items are unique values.
type ledger struct {
	mu                      sync.Mutex
	pulled, used, discarded map[int]int
	reasons                 map[int]error
}

func newLedger() *ledger {
	return &ledger{pulled: map[int]int{}, used: map[int]int{}, discarded: map[int]int{}, reasons: map[int]error{}}
}

func (l *ledger) pull(v int) { l.add(l.pulled, v) }
func (l *ledger) use(v int)  { l.add(l.used, v) }

func (l *ledger) discard(v int, reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.discarded[v]++
	l.reasons[v] = reason
}

func (l *ledger) add(m map[int]int, v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[v]++
}

// check: every item pulled once, then used or discarded (once), never both;
// nothing used or discarded that was not pulled. once: each item is used at
// most once (not so for CombineLatest).
func (l *ledger) check(t require.TestingT, once bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, n := range l.pulled {
		require.Equal(t, 1, n, "item %d pulled %d times", v, n)
		u, d := l.used[v], l.discarded[v]
		require.True(t, (u > 0) != (d > 0), "item %d used %d times and discarded %d times", v, u, d)
		require.LessOrEqual(t, d, 1, "item %d discarded %d times", v, d)
		if once {
			require.LessOrEqual(t, u, 1, "item %d used %d times", v, u)
		}
	}
	for v := range l.used {
		require.Contains(t, l.pulled, v, "item %d used but never pulled", v)
	}
	for v := range l.discarded {
		require.Contains(t, l.pulled, v, "item %d discarded but never pulled", v)
	}
}

// from emits base, base+1, ... (n of them; n < 0: endlessly), then
// completes, or fails with end if it is not nil; each item is counted as
// pulled in l.
func from(l *ledger, base, n int, end error) flux.Flux[int] {
	src := flux.Map(endless, func(v int) int { return base + v })
	if n >= 0 {
		src = flux.Range(base, n)
	}
	if end != nil {
		src = flux.Concat(src, flux.Error[int](end))
	}
	return src.DoOnNext(l.pull)
}

// ending is how a subscription in a discard-accounting test ends.
type ending struct {
	name  string
	limit int  // Take(limit) if > 0
	fail  int  // the onNext fails at this item if > 0
	stop  int  // ctx is cancelled at this item if > 0
	src   bool // a source fails (set up by the test)
}

// sourceEnd is how the failing source ends: errBoom, or nil.
func (e ending) sourceEnd() error {
	if e.src {
		return errBoom
	}
	return nil
}

var endings = []ending{
	{name: "complete"},
	{name: "source error", src: true},
	{name: "Take", limit: 3},
	{name: "onNext error", fail: 3},
	{name: "ctx cancelled", stop: 3},
}

// account subscribes op (given the ledger, for its sources and combinator)
// ending as e says, rounds times, and checks the ledger after each run.
func account(t *testing.T, e ending, once bool, op func(l *ledger) flux.Flux[int]) {
	for range 20 {
		l := newLedger()
		f := flux.DoOnDiscard(op(l), l.discard)
		if e.limit > 0 {
			f = f.Take(e.limit)
		}
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		err := f.Subscribe(ctx, func(v int) error {
			if n++; once { // CombineLatest's combinator records its uses
				l.use(v)
			}
			switch n {
			case e.fail:
				return errStop
			case e.stop:
				cancel()
			}
			return nil
		})
		cancel()
		switch {
		case e.fail > 0:
			require.ErrorIs(t, err, errStop)
		case e.stop > 0:
			require.ErrorIs(t, err, context.Canceled)
		case e.src:
			require.ErrorIs(t, err, errBoom)
		default:
			require.NoError(t, err)
		}
		l.check(t, once)
	}
}

// perSourceOrder checks that got is a permutation of the concatenation of
// the sources and keeps the order of each: source i emitted i*1000+k.
func perSourceOrder(t require.TestingT, lens []int, got []int) {
	var want []int
	for i, n := range lens {
		for k := range n {
			want = append(want, i*1000+k)
		}
	}
	require.ElementsMatch(t, want, got)
	last := map[int]int{}
	for _, v := range got {
		src := v / 1000
		if prev, ok := last[src]; ok {
			require.Less(t, prev, v, "source %d out of order", src)
		}
		last[src] = v
	}
}

// requirePanicError subscribes f and requires its error to carry a
// *PanicError.
func requirePanicError[T any](t *testing.T, f flux.Flux[T]) {
	t.Helper()
	var pe *flux.PanicError
	require.ErrorAs(t, f.Subscribe(t.Context(), func(T) error { return nil }), &pe)
}

// never emits nothing and ends only with its context.
var never = flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
	<-ctx.Done()
	return context.Cause(ctx)
})

func TestMerge(t *testing.T) {
	leakFree(t)
	testkit.Verify(t, flux.Merge[int]()).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Merge(flux.Just(1, 2, 3))).ExpectNext(1, 2, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Merge(flux.Empty[int](), flux.Empty[int]())).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Merge(flux.Just(1), flux.Error[int](errBoom))).
		ThenConsumeWhile(func(v int) bool { return v == 1 }).ExpectErrorIs(errBoom).VerifyT()
	// The first error cancels a source that would never end.
	testkit.Verify(t, flux.Merge(never, failing)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Merge(endless, endless).Take(5)).ExpectNextCount(5).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Merge(endless, never)).ExpectNextCount(3).ThenCancel().VerifyT()
	requirePanicError(t, flux.Merge(flux.Map(flux.Just(1), boom[int]), never))

	got, err := flux.Collect(t.Context(), flux.Merge(flux.Range(0, 50), flux.Range(1000, 30), flux.Range(2000, 40)))
	require.NoError(t, err)
	perSourceOrder(t, []int{50, 30, 40}, got)

	// ctx cancelled before subscribing: nothing runs.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = flux.Collect(ctx, flux.Merge(endless, endless))
	require.ErrorIs(t, err, context.Canceled)
}

func TestMergeDelayError(t *testing.T) {
	leakFree(t)
	got, err := flux.Collect(t.Context(), flux.MergeDelayError(failing, flux.Range(100, 2)))
	require.ErrorIs(t, err, errBoom)
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 101}, got)

	got, err = flux.Collect(t.Context(), flux.MergeDelayError(flux.Error[int](errBoom), flux.Just(1), flux.Error[int](errBoom2)))
	require.ErrorIs(t, err, errBoom)
	require.ErrorIs(t, err, errBoom2)
	require.Equal(t, []int{1}, got)

	testkit.Verify(t, flux.MergeDelayError(flux.Just(1, 2))).ExpectNext(1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.MergeDelayError(failing, endless).Take(20)).ExpectNextCount(20).ExpectComplete().VerifyT()
	// A downstream error or the end of ctx is not delayed.
	err = flux.MergeDelayError(endless, failing).Subscribe(t.Context(), func(int) error { return errStop })
	require.ErrorIs(t, err, errStop)
	require.NotErrorIs(t, err, errBoom)
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err = flux.MergeDelayError(endless, never).Subscribe(ctx, func(int) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
}

// Sources running at their own pace in virtual time interleave, each in its
// order, whatever the delays.
func TestMergeProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sources := rapid.IntRange(1, 4).Draw(rt, "sources")
		lens := make([]int, sources)
		fs := make([]flux.Flux[int], sources)
		for i := range fs {
			lens[i] = rapid.IntRange(0, 20).Draw(rt, fmt.Sprintf("len %d", i))
			vs := make([]int, lens[i])
			for k := range vs {
				vs[k] = i*1000 + k
			}
			fs[i] = delayed(vs, drawDelays(rt, fmt.Sprintf("delays %d", i)))
		}
		prefetch := rapid.IntRange(1, 4).Draw(rt, "prefetch")
		delayErr := rapid.Bool().Draw(rt, "delay error")
		var got []int
		var err error
		synctest.Test(t, func(t *testing.T) {
			f := flux.Merge(fs...)
			if delayErr {
				f = flux.MergeDelayError(fs...)
			}
			got, err = flux.Collect(t.Context(), f.LimitRate(prefetch))
		})
		require.NoError(rt, err)
		perSourceOrder(rt, lens, got)
	})
}

func TestConcat(t *testing.T) {
	testkit.Verify(t, flux.Concat[int]()).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Concat(flux.Just(1, 2), flux.Just(3), flux.Empty[int](), flux.Just(4))).
		ExpectNext(1, 2, 3, 4).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Concat(flux.Just(7))).ExpectNext(7).ExpectComplete().VerifyT()
	subscribed := 0
	third := flux.Defer(func() flux.Flux[int] { subscribed++; return flux.Just(3) })
	testkit.Verify(t, flux.Concat(flux.Just(1), flux.Error[int](errBoom), third)).ExpectNext(1).ExpectErrorIs(errBoom).VerifyT()
	require.Zero(t, subscribed, "a source after an error is not subscribed")
	testkit.Verify(t, flux.Concat(endless, third).Take(3)).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
	require.Zero(t, subscribed)
	testkit.Verify(t, flux.Concat(flux.Just(1), endless)).ExpectNext(1, 0, 1).ThenCancel().VerifyT()

	got, err := flux.Collect(t.Context(), flux.ConcatDelayError(flux.Just(1), flux.Error[int](errBoom), third, flux.Error[int](errBoom2)))
	require.Equal(t, []int{1, 3}, got)
	require.ErrorIs(t, err, errBoom)
	require.ErrorIs(t, err, errBoom2)
	require.Equal(t, 1, subscribed)
	testkit.Verify(t, flux.ConcatDelayError(failing, flux.Just(10))).ExpectNextCount(10).ExpectNext(10).ExpectErrorIs(errBoom).VerifyT()
	// A downstream error is not delayed: the next source is not subscribed.
	err = flux.ConcatDelayError(flux.Just(1), third).Subscribe(t.Context(), func(int) error { return errStop })
	require.ErrorIs(t, err, errStop)
	require.Equal(t, 1, subscribed)

	ctx, cancel := context.WithCancel(t.Context())
	err = flux.Concat(flux.Just(1), third).Subscribe(ctx, func(int) error { cancel(); return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, subscribed, "nothing subscribed after ctx ended")
}

// Concat is the concatenation of the slices; ConcatDelayError too, when no
// source fails.
func TestConcatProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.SliceOfN(rapid.SliceOf(rapid.Int()), 0, 6).Draw(rt, "parts")
		fs := make([]flux.Flux[int], len(parts))
		var want []int
		for i, p := range parts {
			fs[i] = flux.FromSlice(p)
			want = append(want, p...)
		}
		for _, f := range []flux.Flux[int]{flux.Concat(fs...), flux.ConcatDelayError(fs...)} {
			got, err := flux.Collect(context.Background(), f)
			require.NoError(rt, err)
			require.Equal(rt, nonNil(want), nonNil(got))
		}
	})
}

func pairOf(a int, b string) string { return fmt.Sprint(a, b) }

func TestZip(t *testing.T) {
	leakFree(t)
	letters := flux.Just("a", "b", "c", "d")
	testkit.Verify(t, flux.Zip(flux.Just(1, 2, 3), letters, pairOf)).ExpectNext("1a", "2b", "3c").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip(flux.Range(1, 9), letters, pairOf)).ExpectNext("1a", "2b", "3c", "4d").ExpectComplete().VerifyT()
	// The shortest ends it, even first in either position, and the other is cancelled.
	testkit.Verify(t, flux.Zip(flux.Empty[int](), flux.Map(endless, strconv.Itoa), pairOf)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip(never, flux.Empty[string](), pairOf)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip(endless, flux.Just("x"), pairOf)).ExpectNext("0x").ExpectComplete().VerifyT()
	// An error ends it at once, even while waiting for the other side.
	testkit.Verify(t, flux.Zip(never, flux.Error[string](errBoom), pairOf)).ExpectErrorIs(errBoom).VerifyT()
	// At once: the items queued before the error may be discarded (Reactor:
	// "Errors will immediately be forwarded").
	testkit.Verify(t, flux.Zip(failing, flux.Map(endless, strconv.Itoa), func(a int, b string) int { return a })).
		ThenConsumeWhile(func(v int) bool { return v < 10 }).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Zip(endless, flux.Map(endless, strconv.Itoa), pairOf).Take(2)).ExpectNext("00", "11").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip(endless, flux.Map(endless, strconv.Itoa), pairOf)).ExpectNext("00").ThenCancel().VerifyT()
	requirePanicError(t, flux.Zip(flux.Just(1), letters, func(int, string) string { panic("boom") }))
	testkit.Verify(t, flux.Zip[int, string, string](endless, letters, nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

// Zip stops at the shortest: the pairs of the common prefix, whatever the
// delays of either side.
func TestZipProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		as := rapid.SliceOfN(rapid.IntRange(0, 99), 0, 20).Draw(rt, "a")
		bs := rapid.SliceOfN(rapid.IntRange(0, 99), 0, 20).Draw(rt, "b")
		da, db := drawDelays(rt, "a delays"), drawDelays(rt, "b delays")
		prefetch := rapid.IntRange(1, 4).Draw(rt, "prefetch")
		var got [][2]int
		var err error
		synctest.Test(t, func(t *testing.T) {
			zipped := flux.Zip(delayed(as, da), delayed(bs, db), func(a, b int) [2]int { return [2]int{a, b} })
			got, err = flux.Collect(t.Context(), zipped.LimitRate(prefetch))
		})
		require.NoError(rt, err)
		want := [][2]int{}
		for i := range min(len(as), len(bs)) {
			want = append(want, [2]int{as[i], bs[i]})
		}
		require.Equal(rt, want, nonNil(got))
	})
}

// at emits vs[i] at virtual time ticks[i] after the subscription, then
// completes at end (or at the last tick if end is 0).
func paceAt(vs []int, ticks []time.Duration, end time.Duration) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		start := time.Now()
		wait := func(d time.Duration) error {
			t := time.NewTimer(time.Until(start.Add(d)))
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		for i, v := range vs {
			if err := wait(ticks[i]); err != nil {
				return err
			}
			if err := s.Next(v); err != nil {
				return err
			}
		}
		return wait(end)
	})
}

// durations returns the given numbers of milliseconds as durations.
func durations(ns ...int) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n) * time.Millisecond
	}
	return out
}

func TestCombineLatest(t *testing.T) {
	sum := func(a, b int) int { return 10*a + b }
	synctest.Test(t, func(t *testing.T) {
		// a at 0, 20, 40 ms; b at 10, 30 ms.
		a, b := paceAt([]int{1, 2, 3}, durations(0, 20, 40), 0), paceAt([]int{1, 2}, durations(10, 30), 0)
		testkit.Verify(t, flux.CombineLatest(a, b, sum)).ExpectNext(11, 21, 22, 32).ExpectComplete().VerifyT()
		// It completes once both completed: b's last value combines with
		// a's after b completed.
		testkit.Verify(t, flux.CombineLatest(paceAt([]int{1, 2}, durations(0, 50), 0), paceAt([]int{5}, durations(10), 10*time.Millisecond), sum)).
			ExpectNext(15, 25).ExpectComplete().VerifyT()
		// An error ends it at once.
		failLater := flux.Concat(paceAt([]int{1}, durations(10), 0), flux.Error[int](errBoom))
		testkit.Verify(t, flux.CombineLatest(never, failLater, sum)).ExpectErrorIs(errBoom).VerifyT()
		testkit.Verify(t, flux.CombineLatest(paceAt([]int{1}, durations(0), 0), failLater, sum)).ExpectNext(11).ExpectErrorIs(errBoom).VerifyT()
		requirePanicError(t, flux.CombineLatest(paceAt([]int{1}, durations(0), 0), paceAt([]int{1}, durations(5), 0), func(int, int) int { panic("boom") }))
	})
	// A source completing empty ends it at once: no combination can be made.
	testkit.Verify(t, flux.CombineLatest(flux.Empty[int](), endless, sum)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CombineLatest(never, flux.Empty[int](), sum)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CombineLatest(endless, endless, sum).Take(4)).ExpectNextCount(4).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.CombineLatest(endless, never, sum)).ThenCancel().VerifyT()
	testkit.Verify(t, flux.CombineLatest[int, int, int](endless, endless, nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

// A's items replaced before B's first are discarded with ErrSuperseded; the
// combined ones are not; one held unused at the end goes with the reason.
func TestCombineLatestDiscardsSuperseded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		a := paceAt([]int{1, 2, 3, 4}, durations(0, 1, 2, 20), 0)
		b := paceAt([]int{100}, durations(10), 15*time.Millisecond)
		f := flux.DoOnDiscard(flux.CombineLatest(a, b, func(x, y int) int { return x + y }), l.discard)
		testkit.Verify(t, f).ExpectNext(103, 104).ExpectComplete().VerifyT()
		require.Equal(t, map[int]int{1: 1, 2: 1}, l.discarded)
		require.ErrorIs(t, l.reasons[1], flux.ErrSuperseded)

		l = newLedger()
		f = flux.DoOnDiscard(flux.CombineLatest(paceAt([]int{7}, durations(0), 0), never, func(x, y int) int { return x + y }), l.discard)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, f.Subscribe(ctx, func(int) error { return nil }), context.DeadlineExceeded)
		require.Equal(t, map[int]int{7: 1}, l.discarded, "the latest, never combined")
		require.ErrorIs(t, l.reasons[7], context.DeadlineExceeded)
	})
}

// Every item a combining operator pulled is used or discarded, never both,
// on every kind of end.
func TestCombineDiscardAccounting(t *testing.T) {
	leakFree(t)
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			end := e.sourceEnd()
			n := -1
			if e.limit == 0 && e.fail == 0 && e.stop == 0 {
				n = 50 // complete or fail after 50
			}
			t.Run("Merge", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					return flux.Merge(from(l, 0, n, end), from(l, 1_000_000, -1, nil).Take(40), from(l, 2_000_000, 30, nil))
				})
			})
			t.Run("MergeDelayError", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					return flux.MergeDelayError(from(l, 0, n, end), from(l, 1_000_000, 40, nil)).LimitRate(2)
				})
			})
			t.Run("Zip", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					return flux.Zip(from(l, 0, n, end), from(l, 1_000_000, -1, nil), func(a, b int) int {
						l.use(b) // a is the item passed on
						return a
					})
				})
			})
			t.Run("CombineLatest", func(t *testing.T) {
				account(t, e, false, func(l *ledger) flux.Flux[int] {
					return flux.CombineLatest(from(l, 0, n, end), from(l, 1_000_000, 40, nil), func(a, b int) int {
						l.use(a)
						l.use(b)
						return a + b
					})
				})
			})
		})
	}
}

// A goroutine of a combining operator never outlives its subscription, on
// every path.
func TestCombineJoinsOnEveryEnd(t *testing.T) {
	first := func(x, _ int) int { return x }
	ops := map[string]func(a, b flux.Flux[int]) flux.Flux[int]{
		"Merge":           func(a, b flux.Flux[int]) flux.Flux[int] { return flux.Merge(a, b) },
		"MergeDelayError": func(a, b flux.Flux[int]) flux.Flux[int] { return flux.MergeDelayError(a, b.Take(100)) },
		"Zip":             func(a, b flux.Flux[int]) flux.Flux[int] { return flux.Zip(a, b, first) },
		"CombineLatest":   func(a, b flux.Flux[int]) flux.Flux[int] { return flux.CombineLatest(a, b, first) },
		"SwitchMap": func(a, _ flux.Flux[int]) flux.Flux[int] {
			return flux.SwitchMap(flux.Just(0, 1), func(int) flux.Flux[int] { return a })
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			leakFree(t)
			require.ErrorIs(t, op(failing, endless).Subscribe(t.Context(), func(int) error { return nil }), errBoom)
			require.ErrorIs(t, op(endless, endless).Subscribe(t.Context(), func(int) error { return errStop }), errStop)
			got, err := flux.Collect(t.Context(), op(endless, endless).Take(3))
			require.NoError(t, err)
			require.Len(t, got, 3)
			ctx, cancel := context.WithCancel(t.Context())
			n := 0
			err = op(endless, endless).Subscribe(ctx, func(int) error {
				if n++; n == 5 {
					cancel()
				}
				return nil
			})
			require.ErrorIs(t, err, context.Canceled)

			// A runtime.Goexit of the downstream (t.FailNow in a handler) still
			// joins every goroutine; one in a source ends the flow with an error.
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = op(endless, endless).Subscribe(context.Background(), func(int) error {
					runtime.Goexit()
					return nil
				})
			}()
			<-done
			exiting := flux.Create(func(context.Context, flux.Sink[int]) error { runtime.Goexit(); return nil })
			if name != "SwitchMap" { // its sources run on the subscribing goroutine
				err = op(exiting, endless).Subscribe(t.Context(), func(int) error { return nil })
				require.ErrorIs(t, err, schedulers.ErrGoexit)
			}
		})
	}
}

func ExampleMerge() {
	// Each source keeps its order; the interleaving depends on timing, so
	// the example sorts.
	got, err := flux.Collect(context.Background(), flux.Merge(flux.Just(1, 3, 5), flux.Just(2, 4)))
	slices.Sort(got)
	fmt.Println(got, err)
	// Output: [1 2 3 4 5] <nil>
}

func ExampleMergeDelayError() {
	got, err := flux.Collect(context.Background(),
		flux.MergeDelayError(flux.Error[int](errors.New("first failed")), flux.Just(1, 2)))
	fmt.Println(got, err)
	// Output: [1 2] first failed
}

func ExampleConcat() {
	got, err := flux.Collect(context.Background(), flux.Concat(flux.Just(1, 2), flux.Range(3, 2)))
	fmt.Println(got, err)
	// Output: [1 2 3 4] <nil>
}

func ExampleConcatDelayError() {
	got, err := flux.Collect(context.Background(),
		flux.ConcatDelayError(flux.Just(1), flux.Error[int](errors.New("second failed")), flux.Just(3)))
	fmt.Println(got, err)
	// Output: [1 3] second failed
}

func ExampleZip() {
	names := flux.Just("ada", "bob", "cy")
	ages := flux.Just(36, 41)
	got, err := flux.Collect(context.Background(), flux.Zip(names, ages, func(n string, a int) string {
		return fmt.Sprintf("%s:%d", n, a)
	}))
	fmt.Println(got, err)
	// Output: [ada:36 bob:41] <nil>
}

func ExampleCombineLatest() {
	// One item on each side: one combination. (With more, which
	// combinations appear depends on the timing of the sources.)
	got, err := flux.Collect(context.Background(),
		flux.CombineLatest(flux.Just(10), flux.Just(1), func(a, b int) int { return a + b }))
	fmt.Println(got, err)
	// Output: [11] <nil>
}
