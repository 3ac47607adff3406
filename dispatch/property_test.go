package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// stuck is how long, in virtual time, a run may make no progress before the
// stop point is taken anyway: the bubble's clock only jumps that far when
// every goroutine waits (handlers blocked until cancelled).
const stuck = time.Hour

// For random parallelism, scheduler parallelism, pending budgets, workloads,
// stop points and ordering (by group, or WithKeyOrdering), each run keeps
// per-key FIFO order and group serial execution (id serial by key), loses
// nothing, and leaves no goroutine behind (the bubble of
// rapid.SyncTest fails on any).
func TestPropertyOrderingAndNoLoss(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.IntRange(1, 256).Draw(rt, "parallelism")
		pool := rapid.IntRange(1, 8).Draw(rt, "pool")
		budget := rapid.IntRange(1, 256).Draw(rt, "budget")
		w := testkit.Workloads(orders, 300).Draw(rt, "workload")
		perKey := rapid.Bool().Draw(rt, "per key")
		rapid.SyncTest(rt, func(rt *rapid.T) { runWorkload(rt, p, pool, budget, perKey, w, nil) })
	})
}

// The same properties with the exchanges handed over by a BatchSource in
// batches of random sizes: a batch's exchanges are staged in their lanes
// and published at the batch's end or before the intake waits for room,
// stops and forces falling anywhere in a batch.
func TestPropertyBatchesOrderingAndNoLoss(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.IntRange(1, 64).Draw(rt, "parallelism")
		pool := rapid.IntRange(1, 4).Draw(rt, "pool")
		budget := rapid.IntRange(1, 64).Draw(rt, "budget")
		w := testkit.Workloads(orders, 300).Draw(rt, "workload")
		perKey := rapid.Bool().Draw(rt, "per key")
		sizes := rapid.SliceOfN(rapid.IntRange(1, 80), 1, 20).Draw(rt, "batch sizes")
		rapid.SyncTest(rt, func(rt *rapid.T) { runWorkload(rt, p, pool, budget, perKey, w, sizes) })
	})
}

// batches is a BatchSource of xs in batches of sizes, in turn, counting
// what it hands over into n.
func batches(xs []testkit.Exchange, sizes []int, n *atomic.Int64) dispatch.Source[testkit.Exchange] {
	return dispatch.BatchSource(func(ctx context.Context, emit func([]testkit.Exchange) error) error {
		for i, k := 0, 0; i < len(xs); k++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			b := xs[i:min(len(xs), i+sizes[k%len(sizes)])]
			i += len(b)
			n.Add(int64(len(b)))
			if err := emit(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// runWorkload runs w, from a flux.FromSlice, or with sizes from batches.
func runWorkload(rt *rapid.T, p, pool, budget int, perKey bool, w testkit.Workload, sizes []int) {
	sched, err := schedulers.NewParallel("property", pool)
	if err != nil {
		rt.Fatal(err)
	}
	reached := make(chan struct{})
	var once sync.Once
	var calls atomic.Int64
	if w.Stop.After == 0 {
		once.Do(func() { close(reached) })
	}
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
		func(ctx context.Context, x testkit.Exchange) error {
			if calls.Add(1) == int64(w.Stop.After) {
				once.Do(func() { close(reached) })
			}
			return testkit.Perform(ctx, x)
		})
	var hooked, refused atomic.Int64
	slice, emitted := counted(flux.FromSlice(w.Exchanges))
	var source dispatch.Source[testkit.Exchange] = slice
	maxRefused := int64(1) // FromSlice sees its ctx end at the refusal
	if sizes != nil {
		emitted = new(atomic.Int64)
		source = batches(w.Exchanges, sizes, emitted)
		maxRefused = int64(slices.Max(sizes)) // the rest of the batch the stop met
	}
	var keyed dispatch.Option[testkit.Exchange]
	if perKey {
		keyed = dispatch.WithKeyOrdering()
	}
	d, err := dispatch.New("property", orders, source, rec.Handle, quiet, keyed,
		dispatch.WithParallelism(p), dispatch.WithMaxPending(budget), dispatch.WithScheduler(sched),
		dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
			hooked.Add(1)
			switch {
			case errors.Is(reason, dispatch.ErrStopped):
				refused.Add(1)
			case !errors.Is(reason, dispatch.ErrForceStopped):
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
	if w.Stop.Kind != testkit.StopNone {
		select {
		case <-reached:
		case <-d.Done():
		case <-time.After(stuck):
		}
	}
	switch w.Stop.Kind {
	case testkit.StopGraceful:
		if err := d.StopGracefully(ctx); err != nil {
			rt.Fatalf("graceful stop: %v", err)
		}
	case testkit.StopForce:
		d.ForceStop()
	case testkit.StopForceDuringGraceful:
		errc := make(chan error, 1)
		go func() { errc <- d.StopGracefully(ctx) }()
		select {
		case <-d.Done():
		case <-time.After(w.Stop.ForceAfter):
		}
		d.ForceStop()
		if err := <-errc; err != nil {
			rt.Fatalf("graceful stop taken over by force: %v", err)
		}
	}
	<-d.Done()
	if err := sched.DisposeGracefully(ctx); err != nil {
		rt.Fatal(err)
	}
	checkRun(rt, emitted.Load(), d.Stats(), rec.Calls(), hooked.Load(), refused.Load(), maxRefused, perKey, w)
}

func checkRun(rt *rapid.T, emitted int64, s dispatch.Stats, calls []testkit.Call, hooked, refused, maxRefused int64, perKey bool, w testkit.Workload) {
	for _, check := range []func() error{
		func() error { return testkit.PerKeyFIFO(calls) },
		func() error { return serial(perKey, calls) },
		func() error { return testkit.NoLoss(emitted, s, calls) },
	} {
		if err := check(); err != nil {
			rt.Fatal(err)
		}
	}
	if hooked != s.Discarded {
		rt.Fatalf("discard hook called %d times, %d discarded", hooked, s.Discarded)
	}
	if s.Received > int64(len(w.Exchanges)) {
		rt.Fatalf("received %d of %d exchanges", s.Received, len(w.Exchanges))
	}
	if refused > maxRefused {
		rt.Fatalf("%d exchanges refused after the intake closed: the source was not stopped", refused)
	}
	if !w.Stop.Kind.Forces() && s.Discarded != refused {
		rt.Fatalf("%d discarded without a force", s.Discarded)
	}
	if w.Stop.Kind == testkit.StopNone && s.Received != int64(len(w.Exchanges)) {
		rt.Fatalf("received %d of %d exchanges without a stop", s.Received, len(w.Exchanges))
	}
}

// The same properties through a MainDispatcher: the workload's ids are
// spread over two named aggregates with children and one without, whose
// exchanges are discarded with ErrUnknownAggregate.
func TestPropertyMainDispatcher(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.IntRange(1, 64).Draw(rt, "parallelism")
		budget := rapid.IntRange(1, 64).Draw(rt, "budget")
		w := testkit.Workloads(orders, 200).Draw(rt, "workload")
		named := []aggregate.MaterializedNamedAggregate{orders, invoices, payments}
		for i := range w.Exchanges {
			w.Exchanges[i].ID.Named = named[aggregate.GroupKey(w.Exchanges[i].ID.ID, len(named))]
		}
		perKey := rapid.Bool().Draw(rt, "per key")
		rapid.SyncTest(rt, func(rt *rapid.T) { runMain(rt, p, budget, perKey, w) })
	})
}

func runMain(rt *rapid.T, p, budget int, perKey bool, w testkit.Workload) {
	sup, err := aggregate.NewSchedulerSupplier("property", aggregate.WithParallelism(2))
	if err != nil {
		rt.Fatal(err)
	}
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag {
		child := 0 // groups are per child: number them apart
		if x.ID.Named == invoices {
			child = 1
		}
		return testkit.Tag{Key: x.ID.String(), Seq: x.Seq, Group: child*p + x.ID.Mod(p)}
	}, testkit.Perform)
	var hooked atomic.Int64
	source, emitted := counted(flux.FromSlice(w.Exchanges))
	var keyed dispatch.Option[testkit.Exchange]
	if perKey {
		keyed = dispatch.WithKeyOrdering()
	}
	m, err := dispatch.NewMain("property", []aggregate.NamedAggregate{orders, invoices}, source,
		rec.Handle, sup, quiet, keyed, dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
		dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
			hooked.Add(1)
			stopped := errors.Is(reason, dispatch.ErrStopped) || errors.Is(reason, dispatch.ErrForceStopped)
			switch {
			case errors.Is(reason, dispatch.ErrUnknownAggregate):
				if x.ID.Named != payments {
					rt.Errorf("%v discarded for %v", x.ID, reason)
				}
			case !stopped:
				rt.Errorf("%v discarded for %v", x.ID, reason)
			}
		}))
	if err != nil {
		rt.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Prepare(ctx); err != nil {
		rt.Fatal(err)
	}
	if err := m.Start(); err != nil {
		rt.Fatal(err)
	}
	switch w.Stop.Kind {
	case testkit.StopNone:
	case testkit.StopGraceful:
		time.Sleep(w.Stop.ForceAfter) // virtual: a random point of the run
		if err := m.StopGracefully(ctx); err != nil {
			rt.Fatal(err)
		}
	default:
		select {
		case <-m.Done():
		case <-time.After(w.Stop.ForceAfter):
		case <-time.After(stuck):
		}
		m.ForceStop()
	}
	<-m.Done()
	s := m.Stats()
	calls := rec.Calls()
	for _, err := range []error{testkit.PerKeyFIFO(calls), serial(perKey, calls), testkit.NoLoss(emitted.Load(), s, calls)} {
		if err != nil {
			rt.Fatal(err)
		}
	}
	if hooked.Load() != s.Discarded {
		rt.Fatalf("discard hook called %d times, %d discarded", hooked.Load(), s.Discarded)
	}
	if w.Stop.Kind == testkit.StopNone && s.Received != int64(len(w.Exchanges)) {
		rt.Fatalf("received %d of %d without a stop", s.Received, len(w.Exchanges))
	}
	// The supplier is lent: it still serves after the main dispatcher
	// stopped, and its owner stops it.
	if _, err := sup.GetOrInitialize(orders); err != nil {
		rt.Fatalf("the main dispatcher stopped the supplier it borrows: %v", err)
	}
	if err := sup.StopGracefully(ctx); err != nil {
		rt.Fatal(err)
	}
}
