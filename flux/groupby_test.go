package flux_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// counted emits 0..n-1 (n < 0: endlessly), counting the items it pushed
// into the pipeline.
func counted(n int, pulled *atomic.Int64) flux.Flux[int] {
	src := endless
	if n >= 0 {
		src = flux.Range(0, n)
	}
	return src.DoOnNext(func(int) { pulled.Add(1) })
}

// dispatch is the dispatcher's shape: GroupBy -> FlatMap(group ->
// PublishOn(s) -> ConcatMap(handler)), or plain group consumption when s is
// nil.
func dispatch[R any](src flux.Flux[int], key func(int) int, groups, buffer int, s schedulers.Scheduler,
	handler func(int) flux.Flux[R]) flux.Flux[R] {
	g := flux.GroupBy(src, key, groups, flux.WithGroupBuffer(buffer))
	return flux.FlatMap(g, func(gf flux.GroupedFlux[int]) flux.Flux[R] {
		in := gf.Flux
		if s != nil {
			in = in.PublishOn(s, buffer)
		}
		return flux.ConcatMap(in, handler)
	}, groups)
}

// Every item arrives exactly once and in order within its group, for random
// keys, 1..512 groups and 1..64 buffers, fused with PublishOn or not.
func TestGroupByFlatMapProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		groups := rapid.IntRange(1, 512).Draw(rt, "groups")
		buffer := rapid.IntRange(1, 64).Draw(rt, "buffer")
		keys := drawKeys(rt, groups)
		usePublishOn := rapid.Bool().Draw(rt, "publishOn")
		var s schedulers.Scheduler
		if usePublishOn {
			var err error
			s, err = schedulers.NewParallel("prop", 2)
			require.NoError(rt, err)
			defer func() { require.NoError(rt, s.DisposeGracefully(context.Background())) }()
		}
		// items are indexes into keys, so each is unique.
		f := dispatch(flux.Range(0, len(keys)), func(i int) int { return keys[i] }, groups, buffer, s,
			func(i int) flux.Flux[int] { return flux.Just(i) })
		seen := make([]bool, len(keys))
		last := make(map[int]int)
		err := f.Subscribe(context.Background(), func(i int) error {
			if seen[i] {
				rt.Fatalf("item %d delivered twice", i)
			}
			seen[i] = true
			if p, ok := last[keys[i]]; ok && p > i {
				rt.Fatalf("group %d: item %d after %d", keys[i], i, p)
			}
			last[keys[i]] = i
			return nil
		})
		require.NoError(rt, err)
		for i, ok := range seen {
			if !ok {
				rt.Fatalf("item %d lost", i)
			}
		}
	})
}

// drawKeys draws up to 3000 keys in [0, groups): uniform, or concentrated on
// a few hot keys. rapid's own slices stay short, so the keys come from a
// drawn seed (shrinking then shortens the sequence and the hot set).
func drawKeys(rt *rapid.T, groups int) []int {
	n := rapid.IntRange(0, 3000).Draw(rt, "items")
	hot := rapid.IntRange(1, groups).Draw(rt, "distinct keys")
	r := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 0))
	keys := make([]int, n)
	for i := range keys {
		keys[i] = r.IntN(hot) * (groups / hot)
	}
	return keys
}

// A slow group back-pressures the source: while one group's handler is
// blocked, the items pulled stay within groups x buffer + 1 (the item the
// router holds), however long the source is.
func TestGroupByBoundedPull(t *testing.T) {
	for _, fused := range []bool{true, false} {
		t.Run(map[bool]string{true: "fused", false: "plain"}[fused], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const groups, buffer = 4, 3
				var s schedulers.Scheduler
				if fused {
					s = newParallel(t, 2)
				}
				var pulled atomic.Int64
				release := make(chan struct{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					done <- dispatch(counted(-1, &pulled), func(v int) int { return v % groups }, groups, buffer, s,
						func(v int) flux.Flux[int] {
							if v == 0 {
								<-release // group 0's first item blocks its handler
							}
							return flux.Just(v)
						}).Subscribe(ctx, func(int) error { return nil })
				}()
				synctest.Wait()
				// Group 0 holds its in-flight item and buffer-1 more, the router
				// waits on it with one item in hand, and the other groups have
				// drained every item they got before.
				require.Equal(t, int64(groups*buffer+1), pulled.Load())
				close(release)
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
			})
		})
	}
}

// Fused with GroupBy, PublishOn keeps an item's slot until the downstream
// returned from it: with one group of buffer 2 and the handler blocked on the
// first item, exactly 3 items are pulled (in flight, queued, in the router's
// hand). Without fusion (a Map between) PublishOn's own queue would add more.
func TestPublishOnFusionHoldsTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			name   string
			fuse   bool
			pulled int64
		}{{"fused", true, 3}, {"copied", false, 5}} {
			s := newParallel(t, 1)
			var pulled atomic.Int64
			release := make(chan struct{})
			g := flux.GroupBy(counted(100, &pulled), func(int) int { return 0 }, 1, flux.WithGroupBuffer(2))
			f := flux.FlatMap(g, func(gf flux.GroupedFlux[int]) flux.Flux[int] {
				in := gf.Flux
				if !c.fuse {
					in = in.Filter(func(int) bool { return true })
				}
				return in.PublishOn(s, 2)
			}, 1)
			done := make(chan error, 1)
			go func() {
				done <- f.Subscribe(t.Context(), func(v int) error {
					if v == 0 {
						<-release
					}
					return nil
				})
			}()
			synctest.Wait()
			require.Equal(t, c.pulled, pulled.Load(), c.name)
			close(release)
			require.NoError(t, <-done)
			require.Equal(t, int64(100), pulled.Load())
		}
	})
}

// On cancellation the discard hook receives exactly the items pulled from the
// source and not handed to the handler: delivered + discarded = pulled, with
// no overlap, for the router's item, group queues and PublishOn alike.
func TestDiscardHookAccountsForEveryItem(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		groups := rapid.IntRange(1, 16).Draw(rt, "groups")
		buffer := rapid.IntRange(1, 8).Draw(rt, "buffer")
		stopAt := rapid.IntRange(1, 200).Draw(rt, "stopAt")
		fused := rapid.Bool().Draw(rt, "fused")
		var s schedulers.Scheduler
		if fused {
			var err error
			s, err = schedulers.NewParallel("discard", 2)
			require.NoError(rt, err)
			defer func() { require.NoError(rt, s.DisposeGracefully(context.Background())) }()
		}
		var (
			mu                 sync.Mutex
			delivered, dropped = map[int]int{}, map[int]int{}
			pulled             atomic.Int64
			count              int
		)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		drop := func(v int, reason error) {
			mu.Lock()
			defer mu.Unlock()
			dropped[v]++
			if reason == nil {
				rt.Fatalf("discarded %d without a reason", v)
			}
		}
		// An item is delivered when the handler gets it; the handler's output
		// has another type, so its own discards are not counted here.
		f := dispatch(counted(-1, &pulled), func(v int) int { return v % groups }, groups, buffer, s,
			func(v int) flux.Flux[string] {
				mu.Lock()
				defer mu.Unlock()
				delivered[v]++
				if count++; count == stopAt {
					cancel()
				}
				return flux.Just("handled")
			})
		err := flux.DoOnDiscard(f, drop).Subscribe(ctx, func(string) error { return nil })
		require.ErrorIs(rt, err, context.Canceled)
		mu.Lock()
		defer mu.Unlock()
		for v := range int(pulled.Load()) {
			if delivered[v]+dropped[v] != 1 {
				rt.Fatalf("item %d: delivered %d times, discarded %d times", v, delivered[v], dropped[v])
			}
		}
		require.Equal(rt, int(pulled.Load()), len(delivered)+len(dropped))
	})
}

func TestGroupByKeyOutOfRange(t *testing.T) {
	for _, key := range []int{-1, 3} {
		var dropped []int
		drop := func(v int, _ error) { dropped = append(dropped, v) }
		groups, err := flux.Collect(t.Context(), flux.DoOnDiscard(flux.GroupBy(flux.Range(0, 5), func(v int) int {
			if v == 2 {
				return key
			}
			return 0
		}, 3), drop))
		require.ErrorIs(t, err, flux.ErrGroupKeyOutOfRange)
		require.Len(t, groups, 1)
		testkit.Verify(t, groups[0].Flux).ExpectNext(0, 1).ExpectErrorIs(flux.ErrGroupKeyOutOfRange).VerifyT()
		require.Equal(t, []int{2}, dropped)
	}
	testkit.Verify(t, flux.GroupBy(flux.Just(1), func(int) int { return 0 }, 0)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.GroupBy[int](flux.Just(1), nil, 1)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.GroupBy(flux.Just(1), func(int) int { return 0 }, 1, flux.WithGroupBuffer(0))).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
}

func TestGroupIsUnicast(t *testing.T) {
	groups, err := flux.Collect(t.Context(), flux.GroupBy(flux.Just(1, 2, 3), func(v int) int { return v % 2 }, 2))
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, 1, groups[0].Key)
	testkit.Verify(t, groups[0].Flux).ExpectNext(1, 3).ExpectComplete().VerifyT()
	testkit.Verify(t, groups[0].Flux).ExpectErrorIs(flux.ErrUnicastGroup).VerifyT()
	s := newParallel(t, 1)
	testkit.Verify(t, groups[1].PublishOn(s, 1)).ExpectNext(2).ExpectComplete().VerifyT()
	testkit.Verify(t, groups[1].PublishOn(s, 1)).ExpectErrorIs(flux.ErrUnicastGroup).VerifyT()
}

// A group whose subscriber cancels is reopened by the next item of its key
// (Reactor: keys i mod 2, each group limited to one item, gives 0:0, 1:1,
// 0:2, 1:3, ...).
func TestCancelledGroupReopens(t *testing.T) {
	type kv struct{ k, v int }
	f := flux.ConcatMap(flux.GroupBy(flux.Range(0, 6), func(v int) int { return v % 2 }, 2),
		func(g flux.GroupedFlux[int]) flux.Flux[kv] {
			return flux.Map(g.Take(1), func(v int) kv { return kv{g.Key, v} })
		})
	testkit.Verify(t, f).ExpectNext(kv{0, 0}, kv{1, 1}, kv{0, 2}, kv{1, 3}, kv{0, 4}, kv{1, 5}).ExpectComplete().VerifyT()
}

// An upstream error reaches every group after its buffered items.
func TestGroupByUpstreamErrorAfterItems(t *testing.T) {
	groups, err := flux.Collect(t.Context(), flux.GroupBy(failing, func(v int) int { return v % 2 }, 2))
	require.ErrorIs(t, err, errBoom)
	require.Len(t, groups, 2)
	testkit.Verify(t, groups[0].Flux).ExpectNext(0, 2, 4, 6, 8).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, groups[1].Flux).ExpectNext(1, 3, 5, 7, 9).ExpectErrorIs(errBoom).VerifyT()
}

// Cancelling the main flux (Take on the groups) keeps the groups already
// handed out: Reactor's example, integers 1..10 by v%3, first 2 groups taken,
// gives group 1 = [1 4 7 10] and group 2 = [2 5 8], even when subscribed
// after the main flux ended; key 0's items go to the discard hook.
func TestGroupByTakeKeepsTheGroupsTaken(t *testing.T) {
	var dropped []int
	drop := func(v int, reason error) {
		require.ErrorIs(t, reason, flux.ErrCancelled)
		dropped = append(dropped, v)
	}
	groups, err := flux.Collect(t.Context(), flux.DoOnDiscard(flux.GroupBy(flux.Range(1, 10), func(v int) int { return v % 3 }, 3).Take(2), drop))
	require.NoError(t, err)
	require.Len(t, groups, 2)
	testkit.Verify(t, groups[0].Flux).ExpectNext(1, 4, 7, 10).ExpectComplete().VerifyT()
	testkit.Verify(t, groups[1].Flux).ExpectNext(2, 5, 8).ExpectComplete().VerifyT()
	require.Equal(t, []int{3, 6, 9}, dropped)
}

// GroupBy(...).Take(n) then FlatMap completes with every item of the groups
// taken, and the source is stopped once those groups ended (here each takes
// 3 items): an endless source ends.
func TestGroupByTakeThenFlatMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var dropped []int
		drop := func(v int, _ error) {
			mu.Lock()
			defer mu.Unlock()
			dropped = append(dropped, v)
		}
		whole := func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }
		got, err := flux.Collect(t.Context(), flux.DoOnDiscard(flux.FlatMap(
			flux.GroupBy(flux.Range(0, 100), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(4)).Take(2), whole, 2), drop))
		require.NoError(t, err)
		slices.Sort(got)
		slices.Sort(dropped)
		for _, v := range got {
			require.NotEqual(t, 2, v%3)
		}
		require.Len(t, got, 67)
		for _, v := range dropped {
			require.Equal(t, 2, v%3)
		}
		require.Len(t, dropped, 33)

		var pulled atomic.Int64
		got, err = flux.Collect(t.Context(), flux.FlatMap(
			flux.GroupBy(counted(-1, &pulled), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(2)).Take(1),
			func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Take(3) }, 1))
		require.NoError(t, err)
		require.Equal(t, []int{0, 3, 6}, got)
		// Key 0 is every third item; its group holds 2, so the router runs
		// ahead of the 3 taken by at most 3 of its items.
		require.LessOrEqual(t, pulled.Load(), int64(3*(3+3)), "the source stops once the group taken ended")
	})
}

// With FlatMap concurrency below the number of groups and inners that end
// with their group (Reactor §1.9, which hangs), the flow fails with
// ErrStalled naming the full group, as soon as that group is full: keys v%3,
// buffer 2, concurrency 2: group 2 is held by FlatMap with items 2 and 5, so
// 8 items complete and a 9th stalls.
func TestGroupByStallsBelowGroupConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		whole := func(gf flux.GroupedFlux[int]) flux.Flux[int] { return gf.Flux }
		for _, shape := range []struct {
			name string
			f    func(n int) flux.Flux[int]
			ok   int
			msg  string
		}{
			{"FlatMap", func(n int) flux.Flux[int] {
				return flux.FlatMap(flux.GroupBy(flux.Range(0, n), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(2), flux.WithStallBuffer(0)), whole, 2)
			}, 8, "group 2 is full and not subscribed, and FlatMap cannot take it: its 2 inners wait for items of groups 0, 1"},
			{"FlatMap fused", func(n int) flux.Flux[int] {
				s := newParallel(t, 2)
				return flux.FlatMap(flux.GroupBy(flux.Range(0, n), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(2), flux.WithStallBuffer(0)),
					func(gf flux.GroupedFlux[int]) flux.Flux[int] {
						return flux.ConcatMap(gf.PublishOn(s, 2), func(v int) flux.Flux[int] { return flux.Just(v) })
					}, 2)
			}, 8, "group 2 is full and not subscribed"},
			// ConcatMap is concurrency 1: group 1 waits with 1 and 3 while
			// group 0 runs, so 5 items complete and a 6th stalls.
			{"ConcatMap", func(n int) flux.Flux[int] {
				return flux.ConcatMap(flux.GroupBy(flux.Range(0, n), func(v int) int { return v % 2 }, 2, flux.WithGroupBuffer(2), flux.WithStallBuffer(0)), whole)
			}, 5, "group 1 is full and not subscribed, and ConcatMap cannot take it: its inner waits for items of group 0"},
		} {
			got, err := flux.Collect(t.Context(), shape.f(shape.ok))
			require.NoError(t, err, shape.name)
			require.Len(t, got, shape.ok, shape.name)
			_, err = flux.Collect(t.Context(), shape.f(shape.ok+1))
			require.ErrorIs(t, err, flux.ErrStalled, shape.name)
			require.ErrorContains(t, err, shape.msg, shape.name)
		}
	})
}

// Slow consumers are not stalls: with concurrency 2 over 3 keys and inners
// that end by themselves after a slow item (Take), the full group waiting for
// a slot is taken once an inner ended, and the flow completes.
func TestGroupByNoStallUnderSlowConsumers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dropped atomic.Int64
		f := flux.FlatMap(flux.GroupBy(flux.Range(0, 300), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(2)),
			func(gf flux.GroupedFlux[int]) flux.Flux[int] {
				return gf.DoOnNext(func(int) { time.Sleep(time.Millisecond) }).Take(2)
			}, 2)
		got, err := flux.Collect(t.Context(), flux.DoOnDiscard(f, func(int, error) { dropped.Add(1) }))
		require.NoError(t, err)
		require.Equal(t, int64(300), int64(len(got))+dropped.Load(), "each item delivered or discarded")

		// ConcatMap whose groups end by themselves after a slow item.
		g := flux.ConcatMap(flux.GroupBy(flux.Range(0, 100), func(v int) int { return v % 2 }, 2, flux.WithGroupBuffer(1)),
			func(gf flux.GroupedFlux[int]) flux.Flux[int] {
				return gf.DoOnNext(func(int) { time.Sleep(time.Millisecond) }).Take(1)
			})
		got, err = flux.Collect(t.Context(), g)
		require.NoError(t, err)
		require.Equal(t, seq(100), got)
	})
}

// ConcatMap over the groups of GroupBy: each group is run to its end before
// the next, and groups end when the source does, so the groups after the
// first wait in GroupBy (buffering their items) while the first runs. Reactor
// completes this; so must we, even for a single item.
func TestGroupByConcatMapCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		whole := func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }
		testkit.Verify(t, flux.ConcatMap(flux.GroupBy(flux.Just(0), func(int) int { return 0 }, 1), whole)).
			ExpectNext(0).ExpectComplete().VerifyT()
		testkit.Verify(t, flux.ConcatMap(flux.GroupBy(flux.Range(0, 10), func(v int) int { return v % 3 }, 3), whole)).
			ExpectNext(0, 3, 6, 9, 1, 4, 7, 2, 5, 8).ExpectComplete().VerifyT()
	})
}

// The groups are handed downstream on a goroutine of GroupBy's: a
// runtime.Goexit there (t.FailNow in a handler) ends the flow with an error
// instead of leaving the subscriber waiting.
func TestGroupByDownstreamGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		err := flux.GroupBy(flux.Range(0, 10), func(v int) int { return v % 2 }, 2).
			Subscribe(t.Context(), func(flux.GroupedFlux[int]) error { runtime.Goexit(); return nil })
		require.ErrorIs(t, err, schedulers.ErrGoexit)
	})
}

// Stall detection is exact for inners that end with their group: whatever
// the delays of the consumers, the flow fails with ErrStalled exactly when
// the groups beyond the first concurrency groups opened (those FlatMap or
// ConcatMap does not take before the upstream ends) get more items beyond
// their buffers, in all, than the stall buffer, and otherwise delivers every
// item. Either way every item pulled is
// delivered or discarded.
func TestGroupByStallProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		groups := rapid.IntRange(1, 6).Draw(rt, "groups")
		keys := rapid.SliceOfN(rapid.IntRange(0, groups-1), 0, 60).Draw(rt, "keys")
		buffer := rapid.IntRange(1, 4).Draw(rt, "buffer")
		concurrency := rapid.IntRange(1, groups).Draw(rt, "concurrency")
		spare := rapid.IntRange(0, 6).Draw(rt, "stall buffer")
		concat := rapid.Bool().Draw(rt, "ConcatMap")
		delays := drawDelays(rt, "consumer delays")
		if concat {
			concurrency = 1
		}
		// The model: the first concurrency groups opened are taken, the
		// others wait unsubscribed until the upstream ends.
		rank, count := map[int]int{}, map[int]int{}
		for _, k := range keys {
			if _, ok := rank[k]; !ok {
				rank[k] = len(rank)
			}
			count[k]++
		}
		// They hold up to spare items beyond their buffers, in all.
		beyond := 0
		for k, r := range rank {
			if r >= concurrency {
				beyond += max(0, count[k]-buffer)
			}
		}
		stall := beyond > spare
		var err error
		var delivered, discarded, pulled atomic.Int64
		synctest.Test(t, func(t *testing.T) {
			src := flux.Range(0, len(keys)).DoOnNext(func(int) { pulled.Add(1) })
			g := flux.GroupBy(src, func(i int) int { return keys[i] }, groups, flux.WithGroupBuffer(buffer), flux.WithStallBuffer(spare))
			n := 0
			inner := func(gf flux.GroupedFlux[int]) flux.Flux[int] {
				return gf.DoOnNext(func(int) { time.Sleep(delays[n%len(delays)]); n++ })
			}
			var f flux.Flux[int]
			if concat {
				f = flux.ConcatMap(g, inner)
			} else {
				var mu sync.Mutex
				f = flux.FlatMap(g, func(gf flux.GroupedFlux[int]) flux.Flux[int] {
					return gf.DoOnNext(func(int) {
						mu.Lock()
						d := delays[n%len(delays)]
						n++
						mu.Unlock()
						time.Sleep(d)
					})
				}, concurrency)
			}
			f = flux.DoOnDiscard(f, func(int, error) { discarded.Add(1) })
			err = f.Subscribe(t.Context(), func(int) error { delivered.Add(1); return nil })
		})
		if stall {
			if !errors.Is(err, flux.ErrStalled) {
				rt.Fatalf("want ErrStalled, got %v", err)
			}
		} else if err != nil {
			rt.Fatalf("want completion, got %v", err)
		} else if delivered.Load() != int64(len(keys)) {
			rt.Fatalf("%d of %d items delivered", delivered.Load(), len(keys))
		}
		if delivered.Load()+discarded.Load() != pulled.Load() {
			rt.Fatalf("pulled %d, delivered %d, discarded %d", pulled.Load(), delivered.Load(), discarded.Load())
		}
	})
}

// When FlatMap takes the groups straight from GroupBy and has a free slot,
// GroupBy hands each group over on the subscribing goroutine, before it
// pulls the next item, as a synchronous operator would: no goroutine of
// GroupBy's is started, and the dispatcher's shape costs what it did.
func TestGroupByHandsToFlatMapOnTheRouter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- dispatch(flux.Range(0, 100), func(v int) int { return v % 4 }, 4, 2, nil,
				func(v int) flux.Flux[int] {
					<-release
					return flux.Just(v)
				}).Subscribe(t.Context(), func(int) error { return nil })
		}()
		synctest.Wait()
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		close(release)
		require.NoError(t, <-done)
		require.NotContains(t, stacks, "flux.(*board[...]).deliver", "no goroutine hands the groups out")
	})
}
