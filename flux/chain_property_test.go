package flux_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// model is what a chain should signal: its items in order, then its end
// (nil: completion).
type model struct {
	items []int
	err   error
}

// chainOp is one operator of a random chain and the same operator over a
// plain slice.
type chainOp struct {
	name  string
	apply func(flux.Flux[int]) flux.Flux[int]
	model func(model) model
}

// racy tells the operators whose items before an upstream error are not all
// delivered (the error cuts ahead of the inners, as documented): they are
// left out of chains whose source fails.
func (op chainOp) racy() bool { return op.name == "FlatMap(1)" || op.name == "Zip(_, Range)" }

func mapModel(m model, fn func(int) int) model {
	out := make([]int, len(m.items))
	for i, v := range m.items {
		out[i] = fn(v)
	}
	return model{out, m.err}
}

// drawChainOp draws the i-th operator of a chain; sched gives each
// PublishOn a scheduler of its own: PublishOns chained on one scheduler with
// fewer goroutines than stages can hold each other's goroutines, a
// drain blocked pushing into the next stage's full queue.
func drawChainOp(rt *rapid.T, sched func() schedulers.Scheduler, i int) chainOp {
	k := rapid.IntRange(0, 6).Draw(rt, fmt.Sprintf("k%d", i))
	switch rapid.IntRange(0, 20).Draw(rt, fmt.Sprintf("op%d", i)) {
	case 0:
		return chainOp{"Map", func(f flux.Flux[int]) flux.Flux[int] { return flux.Map(f, func(v int) int { return v*3 + 1 }) },
			func(m model) model { return mapModel(m, func(v int) int { return v*3 + 1 }) }}
	case 1:
		return chainOp{"Filter", func(f flux.Flux[int]) flux.Flux[int] { return f.Filter(func(v int) bool { return v%2 == 0 }) },
			func(m model) model {
				return model{slices.DeleteFunc(slices.Clone(m.items), func(v int) bool { return v%2 != 0 }), m.err}
			}}
	case 2:
		return chainOp{fmt.Sprintf("Take(%d)", k), func(f flux.Flux[int]) flux.Flux[int] { return f.Take(k) },
			func(m model) model {
				if len(m.items) >= k {
					return model{m.items[:k:k], nil}
				}
				return m
			}}
	case 3:
		return chainOp{fmt.Sprintf("Skip(%d)", k), func(f flux.Flux[int]) flux.Flux[int] { return f.Skip(k) },
			func(m model) model { return model{m.items[min(k, len(m.items)):], m.err} }}
	case 4:
		return chainOp{"TakeUntil", func(f flux.Flux[int]) flux.Flux[int] { return f.TakeUntil(func(v int) bool { return v%5 == 4 }) },
			func(m model) model {
				if i := slices.IndexFunc(m.items, func(v int) bool { return v%5 == 4 }); i >= 0 {
					return model{m.items[: i+1 : i+1], nil}
				}
				return m
			}}
	case 5:
		return chainOp{"Scan", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Scan(f, 1, func(a, v int) int { return (a*7 + v) % 1000 })
		}, func(m model) model {
			out, a := []int{1}, 1
			for _, v := range m.items {
				a = (a*7 + v) % 1000
				out = append(out, a)
			}
			return model{out, m.err}
		}}
	case 6:
		n := k + 1
		return chainOp{fmt.Sprintf("Buffer(%d)+flatten", n), func(f flux.Flux[int]) flux.Flux[int] {
			return flux.ConcatMap(flux.Buffer(f, n), flux.FromSlice[int])
		}, func(m model) model {
			if m.err != nil {
				return model{m.items[: len(m.items)/n*n : len(m.items)/n*n], m.err}
			}
			return m
		}}
	case 7:
		return chainOp{"DistinctUntilChanged", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.DistinctUntilChanged(flux.Map(f, func(v int) int { return v / 2 }))
		}, func(m model) model {
			return model{slices.Compact(mapModel(m, func(v int) int { return v / 2 }).items), m.err}
		}}
	case 8:
		return chainOp{"DefaultIfEmpty", func(f flux.Flux[int]) flux.Flux[int] { return f.DefaultIfEmpty(-1) },
			func(m model) model {
				if len(m.items) == 0 && m.err == nil {
					return model{[]int{-1}, nil}
				}
				return m
			}}
	case 9:
		return chainOp{"OnErrorReturn", func(f flux.Flux[int]) flux.Flux[int] { return f.OnErrorReturn(-2) },
			func(m model) model {
				if m.err != nil {
					return model{append(slices.Clone(m.items), -2), nil}
				}
				return m
			}}
	case 10:
		p := k + 1
		return chainOp{fmt.Sprintf("PublishOn(%d)", p), func(f flux.Flux[int]) flux.Flux[int] { return f.PublishOn(sched(), p) },
			func(m model) model { return m }}
	case 11:
		return chainOp{"ConcatMap dup", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.ConcatMap(f, func(v int) flux.Flux[int] { return flux.Just(v, v+1) })
		}, func(m model) model {
			var out []int
			for _, v := range m.items {
				out = append(out, v, v+1)
			}
			return model{out, m.err}
		}}
	case 12:
		return chainOp{"FlatMap(1)", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.FlatMap(f, func(v int) flux.Flux[int] { return flux.Just(v, -v) }, 1)
		}, func(m model) model {
			var out []int
			for _, v := range m.items {
				out = append(out, v, -v)
			}
			return model{out, m.err}
		}}
	case 13:
		n := k + 1
		return chainOp{fmt.Sprintf("Window(%d)+ConcatMap", n), func(f flux.Flux[int]) flux.Flux[int] {
			return flux.ConcatMap(flux.Window(f, n), func(w flux.Flux[int]) flux.Flux[int] { return w })
		}, func(m model) model { return m }}
	case 14:
		return chainOp{"Concat(_, Just)", func(f flux.Flux[int]) flux.Flux[int] { return flux.Concat(f, flux.Just(100, 101)) },
			func(m model) model {
				if m.err != nil {
					return m
				}
				return model{append(slices.Clone(m.items), 100, 101), nil}
			}}
	case 15:
		return chainOp{"Reduce", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Reduce(f, 0, func(a, v int) int { return a + v })
		}, func(m model) model {
			if m.err != nil {
				return model{nil, m.err}
			}
			sum := 0
			for _, v := range m.items {
				sum += v
			}
			return model{[]int{sum}, nil}
		}}
	case 16:
		r := k % 3
		return chainOp{fmt.Sprintf("Retry(%d)", r), func(f flux.Flux[int]) flux.Flux[int] { return f.Retry(r) },
			func(m model) model {
				if m.err == nil {
					return m
				}
				var out []int
				for range r + 1 {
					out = append(out, m.items...)
				}
				return model{out, m.err}
			}}
	case 17:
		return chainOp{"Zip(_, Range)", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Zip(f, flux.Range(0, 1000), func(a, b int) int { return a*1000 + b })
		}, func(m model) model {
			out := make([]int, len(m.items))
			for i, v := range m.items {
				out[i] = v*1000 + i
			}
			return model{out, m.err}
		}}
	case 18:
		return chainOp{"GroupBy(1 group)+ConcatMap", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.ConcatMap(flux.GroupBy(f, func(int) int { return 0 }, 1, flux.WithGroupBuffer(k+1)),
				func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux })
		}, func(m model) model { return m }}
	case 19:
		return chainOp{"Distinct", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Distinct(flux.Map(f, func(v int) int { return v % 7 }))
		}, func(m model) model {
			seen := map[int]bool{}
			var out []int
			for _, v := range m.items {
				if !seen[v%7] {
					seen[v%7] = true
					out = append(out, v%7)
				}
			}
			return model{out, m.err}
		}}
	default:
		return chainOp{"LimitRate+Merge", func(f flux.Flux[int]) flux.Flux[int] {
			return flux.Merge(f, flux.Empty[int]()).LimitRate(k + 1)
		}, func(m model) model { return m }}
	}
}

// A random chain of operators signals what the same operators do to a plain
// slice: the same items in the same order, then the same end; and a
// downstream that stops after some items sees exactly those.
func TestChainMatchesSliceModel(t *testing.T) {
	leakFree(t)
	rapid.Check(t, func(rt *rapid.T) {
		var made []schedulers.Scheduler
		defer func() {
			for _, s := range made {
				require.NoError(rt, s.DisposeGracefully(t.Context()))
			}
		}()
		sched := func() schedulers.Scheduler {
			s, err := schedulers.NewSingle("chain")
			require.NoError(rt, err)
			made = append(made, s)
			return s
		}
		items := rapid.SliceOfN(rapid.IntRange(-20, 60), 0, 30).Draw(rt, "items")
		fail := rapid.Bool().Draw(rt, "fail")
		src := flux.FromSlice(items)
		m := model{items: items}
		if fail {
			src = flux.Concat(src, flux.Error[int](errBoom))
			m.err = errBoom
		}
		f := src
		var names []string
		for i := range rapid.IntRange(1, 5).Draw(rt, "ops") {
			op := drawChainOp(rt, sched, i)
			if op.racy() && m.err != nil {
				continue
			}
			names = append(names, op.name)
			f, m = op.apply(f), op.model(m)
		}
		rt.Logf("chain %v", names)
		stopAt := rapid.IntRange(-1, len(m.items)+1).Draw(rt, "stopAt")
		errStop := errors.New("stop")
		var got []int
		err := f.Subscribe(t.Context(), func(v int) error {
			got = append(got, v)
			if len(got) == stopAt {
				return errStop
			}
			return nil
		})
		want, wantErr := m.items, m.err
		if stopAt >= 1 && stopAt <= len(m.items) {
			want, wantErr = m.items[:stopAt], errStop
		}
		require.Equal(rt, fmt.Sprint(want), fmt.Sprint(got), "items of %v", names)
		if wantErr == nil {
			require.NoError(rt, err, "%v", names)
		} else {
			require.ErrorIs(rt, err, wantErr, "%v", names)
		}
	})
}
