package dispatch_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// raceExchange is the i-th exchange of a producer: over ids ids, with a
// behaviour drawn from behaviours by i.
func raceExchange(producer, i, ids int, behaviours []testkit.Behaviour) testkit.Exchange {
	return testkit.Exchange{
		ID:  aggregate.NewID(orders, "p"+strconv.Itoa(producer)+"-"+strconv.Itoa(i%ids)),
		Seq: i / ids,
		Do:  behaviours[i%len(behaviours)],
	}
}

// ForceStop racing producers at full speed, on real goroutines: from a
// source (an endless one, so the force always meets it) or from Emit
// callers, with a graceful stop or a Quiesce racing the force at times, and
// Stats read all along. Every snapshot keeps the identity; after Done
// nothing is in flight, every exchange handed over is counted, the discard
// hook and the Observer saw exactly the discarded ones, and each id's
// handled exchanges kept their order; by group, or WithKeyOrdering.
func TestPropertyForceStopRacingProducers(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		push := rapid.Bool().Draw(rt, "push")
		producers := 1
		if push {
			producers = rapid.IntRange(1, 3).Draw(rt, "producers")
		}
		p := rapid.IntRange(1, 32).Draw(rt, "parallelism")
		pool := rapid.IntRange(1, 4).Draw(rt, "pool")
		budget := rapid.IntRange(1, 256).Draw(rt, "budget")
		ids := rapid.IntRange(1, 40).Draw(rt, "ids")
		after := rapid.IntRange(0, 200).Draw(rt, "forceAfterCalls")
		spins := rapid.IntRange(0, 2000).Draw(rt, "forceAfterYields")
		rival := rapid.SampledFrom([]string{"none", "graceful", "quiesce"}).Draw(rt, "rival")
		behaviours := rapid.SliceOfN(rapid.SampledFrom([]testkit.Behaviour{
			testkit.Instant, testkit.Instant, testkit.Instant, testkit.Fail, testkit.Panic, testkit.Block,
		}), 1, 8).Draw(rt, "behaviours")
		perKey := rapid.Bool().Draw(rt, "per key")
		for range 5 { // the same case again: another interleaving
			runForceRace(rt, push, producers, p, pool, budget, ids, after, spins, rival, perKey, behaviours)
		}
	})
}

func runForceRace(rt *rapid.T, push bool, producers, p, pool, budget, ids, after, spins int, rival string, perKey bool, behaviours []testkit.Behaviour) {
	sched, err := schedulers.NewParallel("race", pool)
	if err != nil {
		rt.Fatal(err)
	}
	defer func() { _ = sched.DisposeGracefully(context.Background()) }()
	count, reached := stopAt(after)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
		func(ctx context.Context, x testkit.Exchange) error {
			count()
			return testkit.Perform(ctx, x)
		})
	var hooked atomic.Int64
	obs := &countingObserver{}
	var source dispatch.Source[testkit.Exchange] // nil: Emit
	var emitted atomic.Int64                     // what Emit admitted
	src := &countingSource{}
	if !push {
		source = src.flux(-1, func(i int) testkit.Exchange { return raceExchange(0, i, ids, behaviours) })
	}
	var keyed dispatch.Option[testkit.Exchange]
	if perKey {
		keyed = dispatch.WithKeyOrdering()
	}
	d, err := dispatch.New("race", orders, source, rec.Handle, quiet, keyed,
		dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
		dispatch.WithScheduler(sched), dispatch.WithObserver(obs),
		dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
			hooked.Add(1)
			if !errors.Is(reason, dispatch.ErrStopped) && !errors.Is(reason, dispatch.ErrForceStopped) {
				rt.Errorf("discarded for %v", reason)
			}
		}))
	if err != nil {
		rt.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Prepare(ctx); err != nil {
		rt.Fatal(err)
	}
	if err := d.Start(); err != nil {
		rt.Fatal(err)
	}
	// Emit callers give up once the dispatcher is done, so that a caller
	// waiting for room cannot outlive it.
	emitCtx, cancelEmit := context.WithCancel(ctx)
	defer cancelEmit()
	var wg sync.WaitGroup
	if push {
		for i := range producers {
			wg.Go(func() {
				for n := 0; ; n++ {
					err := d.Emit(emitCtx, raceExchange(i, n, ids, behaviours))
					if err != nil {
						if !errors.Is(err, dispatch.ErrStopped) && !errors.Is(err, context.Canceled) {
							rt.Errorf("Emit: %v", err)
						}
						return
					}
					emitted.Add(1)
				}
			})
		}
	}
	// Stats read all along keep the identity.
	readerDone := make(chan struct{})
	wg.Go(func() {
		for {
			s := d.Stats()
			if s.InFlight < 0 || s.Received != s.Succeeded+s.Failed+s.Discarded+s.InFlight {
				rt.Errorf("snapshot breaks the identity: %+v", s)
			}
			select {
			case <-readerDone:
				return
			default:
			}
		}
	})
	// The force comes after that many handler calls, or that many yields
	// of this goroutine, whichever first: blocked handlers may keep the
	// calls from ever getting there.
wait:
	for range spins {
		select {
		case <-reached:
			break wait
		default:
			runtime.Gosched()
		}
	}
	switch rival {
	case "graceful":
		wg.Go(func() {
			if err := d.StopGracefully(ctx); err != nil {
				rt.Errorf("graceful stop taken over by force: %v", err)
			}
		})
	case "quiesce":
		d.Quiesce()
	}
	d.ForceStop()
	<-d.Done()
	cancelEmit()
	close(readerDone)
	wg.Wait()
	s := d.Stats()
	calls := rec.Calls()
	handedOver := emitted.Load()
	if !push {
		handedOver = src.pulled.Load() // the source returned before Done
	}
	if err := testkit.NoLoss(handedOver, s, calls); err != nil {
		rt.Fatal(err)
	}
	if err := testkit.PerKeyFIFO(calls); err != nil {
		rt.Fatal(err)
	}
	if err := serial(perKey, calls); err != nil {
		rt.Fatal(err)
	}
	if hooked.Load() != s.Discarded || obs.discarded.Load() != s.Discarded {
		rt.Fatalf("discarded %d, hook called %d times, observer %d times", s.Discarded, hooked.Load(), obs.discarded.Load())
	}
	if obs.finishedTotal() != s.Succeeded+s.Failed {
		rt.Fatalf("finished %d times for %d handled", obs.finishedTotal(), s.Succeeded+s.Failed)
	}
	if after2 := d.Stats(); after2 != s {
		rt.Fatalf("counters moved after Done: %+v then %+v", s, after2)
	}
}
