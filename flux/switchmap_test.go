package flux_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// ticking is the inner of the SwitchMap cases: v*10, v*10+1, v*10+2 at 4,
// 8 and 12 ms after its subscription.
func ticking(v int) flux.Flux[int] {
	return paceAt([]int{v * 10, v*10 + 1, v*10 + 2}, durations(4, 8, 12), 0)
}

func TestSwitchMap(t *testing.T) {
	leakFree(t)
	synctest.Test(t, func(t *testing.T) {
		// Items at 0, 10 and 20 ms: the first two inners are cut off by the
		// next item after two of their items; the last runs to its end,
		// which the completion waits for.
		outer := paceAt([]int{0, 1, 2}, durations(0, 10, 20), 0)
		testkit.Verify(t, flux.SwitchMap(outer, ticking)).ExpectNext(0, 1, 10, 11, 20, 21, 22).ExpectComplete().VerifyT()
		// An upstream error cancels the current inner at once.
		failsAt10 := flux.Concat(paceAt([]int{0}, durations(0), 10*time.Millisecond), flux.Error[int](errBoom))
		testkit.Verify(t, flux.SwitchMap(failsAt10, ticking)).ExpectNext(0, 1).ExpectErrorIs(errBoom).VerifyT()
		// An inner error ends the flow and cancels the upstream.
		failingInner := func(v int) flux.Flux[int] {
			return flux.Concat(paceAt([]int{v}, durations(1), 5*time.Millisecond), flux.Error[int](errBoom))
		}
		testkit.Verify(t, flux.SwitchMap(paceAt([]int{7, 8}, durations(0, 50), 0), failingInner)).ExpectNext(7).ExpectErrorIs(errBoom).VerifyT()
		// The end of an inner switched away from is not the flow's.
		testkit.Verify(t, flux.SwitchMap(paceAt([]int{1, 2}, durations(0, 3), 0), func(v int) flux.Flux[int] {
			if v == 1 {
				return never
			}
			return flux.Just(v)
		})).ExpectNext(2).ExpectComplete().VerifyT()
		// A Take downstream stops the upstream and the inner.
		testkit.Verify(t, flux.SwitchMap(outer, ticking).Take(3)).ExpectNext(0, 1, 10).ExpectComplete().VerifyT()
		testkit.Verify(t, flux.SwitchMap(outer, ticking)).ExpectNext(0).ThenCancel().VerifyT()
	})
	testkit.Verify(t, flux.SwitchMap(flux.Empty[int](), ticking)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.SwitchMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] { return flux.Empty[int]() })).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.SwitchMap(flux.Error[int](errBoom), ticking)).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.SwitchMap(flux.Just(1), func(v int) flux.Flux[int] { return endless })).ExpectNext(0, 1, 2).ThenCancel().VerifyT()
	testkit.Verify(t, flux.SwitchMap[int, int](flux.Just(1), nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	requirePanicError(t, flux.SwitchMap(flux.Just(1), func(int) flux.Flux[int] { panic("boom") }))
	requirePanicError(t, flux.SwitchMap(flux.Just(1), func(v int) flux.Flux[int] { return flux.Map(flux.Just(v), boom[int]) }))
	// The last inner of a synchronous upstream always runs to its end.
	got, err := flux.Collect(t.Context(), flux.SwitchMap(flux.Range(0, 100), func(v int) flux.Flux[int] { return flux.Just(v, v) }))
	require.NoError(t, err)
	require.Equal(t, []int{99, 99}, got[len(got)-2:])
}

// An item the current inner pushes after the switch to the next is
// discarded with ErrSuperseded, never delivered.
func TestSwitchMapDiscardsSuperseded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger()
		atTwo := make(chan struct{})
		outer := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
			if err := s.Next(0); err != nil {
				return err
			}
			<-atTwo
			return s.Next(1)
		})
		f := flux.SwitchMap(outer, func(v int) flux.Flux[int] {
			if v == 1 {
				return flux.Just(10).DoOnNext(l.pull)
			}
			// Behind Defer, the inner is not known to be synchronous, so the
			// next item switches away from it.
			return flux.Defer(func() flux.Flux[int] { return flux.Just(1, 2, 3) }).DoOnNext(func(v int) {
				l.pull(v)
				if v == 2 {
					close(atTwo)
					synctest.Wait() // until the upstream switched and waits for this inner
				}
			})
		})
		var got []int
		err := flux.DoOnDiscard(f, l.discard).Subscribe(t.Context(), func(v int) error {
			got = append(got, v)
			l.use(v)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, []int{1, 10}, got)
		require.Equal(t, map[int]int{2: 1}, l.discarded)
		require.ErrorIs(t, l.reasons[2], flux.ErrSuperseded)
		l.check(t, true)
	})
}

// Every item pulled by SwitchMap, of the upstream or of an inner, is
// used or discarded, never both, on every kind of end.
func TestSwitchMapDiscardAccounting(t *testing.T) {
	leakFree(t)
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			end := e.sourceEnd()
			account(t, e, true, func(l *ledger) flux.Flux[int] {
				// A finite upstream: the last inner runs to its end.
				return flux.SwitchMap(from(l, 0, 30, end), func(v int) flux.Flux[int] {
					l.use(v) // the upstream item reached fn
					return from(l, 1_000_000+v*100, 5, nil)
				})
			})
		})
	}
}

func ExampleSwitchMap() {
	// Each query replaces the search in flight. The searches here are
	// synchronous, so each runs to its end before the next query is taken;
	// a slow (asynchronous) search would be cancelled by the next query.
	queries := flux.Just("g", "go", "gopher")
	results := flux.SwitchMap(queries, func(q string) flux.Flux[string] {
		return flux.Just(q+"#1", q+"#2")
	})
	got, err := flux.Collect(context.Background(), results)
	fmt.Println(got, err)
	// Output: [g#1 g#2 go#1 go#2 gopher#1 gopher#2] <nil>
}
