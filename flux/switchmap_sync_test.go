package flux_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// switchMapRuns is how many times the determinism test subscribes.
const switchMapRuns = 1000

// A synchronous inner runs to its end before the next upstream item is
// taken: Just(1, 2, 3) mapped to Range(v, 3) gives Reactor's 1 2 3 2 3 4 3
// 4 5 in every run, over a synchronous upstream (inline) and over one on a
// goroutine of its own (behind Defer, not known to be synchronous).
func TestSwitchMapSynchronousIsDeterministic(t *testing.T) {
	leakFree(t)
	want := []int{1, 2, 3, 2, 3, 4, 3, 4, 5}
	inner := func(v int) flux.Flux[int] { return flux.Range(v, 3) }
	upstreams := map[string]flux.Flux[int]{
		"synchronous": flux.Just(1, 2, 3),
		"deferred":    flux.Defer(func() flux.Flux[int] { return flux.Just(1, 2, 3) }),
	}
	for name, up := range upstreams {
		t.Run(name, func(t *testing.T) {
			equal := 0
			for range switchMapRuns {
				got, err := flux.Collect(t.Context(), flux.SwitchMap(up, inner))
				require.NoError(t, err)
				if slicesEqual(got, want) {
					equal++
				}
			}
			t.Logf("%d of %d runs gave %v", equal, switchMapRuns, want)
			require.Equal(t, switchMapRuns, equal)
		})
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// later is an inner that is not synchronous: its items come from a timer.
func later(vs ...int) flux.Flux[int] {
	return flux.Just(vs...).DelayElements(time.Millisecond)
}

// Reactor's cases of switchMap (FluxSwitchMapTest, FluxSwitchMapNoPrefetchTest,
// and the lookahead example of the reference guide), translated; the timed
// ones run in virtual time.
func TestSwitchMapReactorCases(t *testing.T) {
	leakFree(t)
	cases := []struct {
		name string
		f    func() flux.Flux[int]
		want []int
		err  error // nil: completes
		pe   bool  // the flow ends with a *PanicError
	}{
		{name: "synchronous inners emit all before the next item", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] { return flux.Range(v, 3) })
		}, want: []int{1, 2, 3, 2, 3, 4, 3, 4, 5}},
		{name: "normal: hot upstream, synchronous inners", f: func() flux.Flux[int] {
			return flux.SwitchMap(emitted(1, 2, 3), func(v int) flux.Flux[int] { return flux.Range(v, 2) })
		}, want: []int{1, 2, 2, 3, 3, 4}},
		{name: "synchronous inner mapped", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Map(flux.Range(1, 3), double), func(v int) flux.Flux[int] { return flux.Just(v).Filter(func(int) bool { return true }) })
		}, want: []int{2, 4, 6}},
		{name: "main empty", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Empty[int](), func(v int) flux.Flux[int] { return flux.Just(v) })
		}},
		{name: "main error", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Error[int](errBoom), func(v int) flux.Flux[int] { return flux.Just(v) })
		}, err: errBoom},
		{name: "main error after items", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Concat(flux.Just(1, 2), flux.Error[int](errBoom)), func(v int) flux.Flux[int] { return flux.Just(v * 10) })
		}, want: []int{10, 20}, err: errBoom},
		{name: "inner empty", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3), func(int) flux.Flux[int] { return flux.Empty[int]() })
		}},
		{name: "inner error cancels the main", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] {
				if v == 2 {
					return flux.Error[int](errBoom)
				}
				return flux.Just(v)
			})
		}, want: []int{1}, err: errBoom},
		{name: "mapper panics", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2), func(v int) flux.Flux[int] {
				if v == 2 {
					panic("boom")
				}
				return flux.Just(v)
			})
		}, want: []int{1}, pe: true},
		{name: "take cancels a synchronous inner", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2), func(v int) flux.Flux[int] { return flux.Range(v*10, 100) }).Take(3)
		}, want: []int{10, 11, 12}},
		{name: "asynchronous inners: only the last of a synchronous main", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] { return later(v, v*10) })
		}, want: []int{3, 30}},
		{name: "asynchronous inner then a synchronous one", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3), func(v int) flux.Flux[int] {
				if v == 2 {
					return flux.Just(20)
				}
				return later(v)
			})
		}, want: []int{20, 3}},
		{name: "lookaheads: a slow inner is cancelled by the next item", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2, 3, 4, 5).DelayElements(100*time.Millisecond), func(v int) flux.Flux[int] {
				return flux.Just(v * 10).DelayElements(500 * time.Millisecond)
			})
		}, want: []int{50}},
		{name: "inner completes before the next item", f: func() flux.Flux[int] {
			return flux.SwitchMap(flux.Just(1, 2).DelayElements(100*time.Millisecond), func(v int) flux.Flux[int] {
				return flux.Just(v*10, v*10+1).DelayElements(10 * time.Millisecond)
			})
		}, want: []int{10, 11, 20, 21}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := flux.Collect(t.Context(), c.f())
				require.Equal(t, c.want, nilIfEmpty(got))
				switch {
				case c.pe:
					var p *flux.PanicError
					require.ErrorAs(t, err, &p)
				case c.err != nil:
					require.ErrorIs(t, err, c.err)
				default:
					require.NoError(t, err)
				}
			})
		})
	}
}

func nilIfEmpty(vs []int) []int {
	if len(vs) == 0 {
		return nil
	}
	return vs
}

// emitted is a hot-like upstream: its items come from Create, which runs
// SwitchMap's upstream on a goroutine of its own.
func emitted(vs ...int) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for _, v := range vs {
			if err := s.Next(v); err != nil {
				return err
			}
		}
		return nil
	})
}
