package dispatch_test

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// The lanes engine and the flux chain it replaces (GroupBy -> per group
// PublishOn -> ConcatMap(handler), merged by FlatMap at concurrency =
// groups, as the dispatcher was assembled before the lanes) handle the same
// random workloads the same way: without a stop, the same outcome for every
// exchange, in the same order per id, and the same counts; with a stop at a
// random point (graceful, force, force during graceful), each path loses
// nothing by its own accounting, handles a prefix of each id's exchanges in
// order, and gives every exchange it handled the outcome its behaviour
// calls for (or cancelled, after a force); on the prefix both handled, the
// two agree.
func TestPropertyLanesMatchTheFluxChain(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.IntRange(1, 64).Draw(rt, "parallelism")
		pool := rapid.IntRange(1, 4).Draw(rt, "pool")
		budget := rapid.IntRange(1, 128).Draw(rt, "budget")
		buffer := rapid.IntRange(1, 32).Draw(rt, "chainBuffer")
		w := testkit.Workloads(orders, 300).Draw(rt, "workload")
		rapid.SyncTest(rt, func(rt *rapid.T) {
			lanes := runLanesPath(rt, p, pool, budget, w)
			chain := runChainPath(rt, p, pool, buffer, w)
			for _, r := range []pathRun{lanes, chain} {
				r.checkOwn(rt, w)
			}
			compareRuns(rt, w, lanes, chain)
		})
	})
}

// pathRun is what one path did with a workload.
type pathRun struct {
	name      string
	emitted   int64 // handed over by the source
	discarded int64 // reported to the discard hook
	calls     []testkit.Call
}

// perKey returns the calls of each id, in start order.
func (r pathRun) perKey() map[string][]testkit.Call {
	m := map[string][]testkit.Call{}
	for _, c := range r.calls {
		m[c.Key] = append(m[c.Key], c)
	}
	for _, cs := range m {
		slices.SortFunc(cs, func(a, b testkit.Call) int { return cmp.Compare(a.Start, b.Start) })
	}
	return m
}

// expected is the outcome x's behaviour calls for, without a force.
func expected(x testkit.Exchange) dispatch.Outcome {
	switch x.Do {
	case testkit.Fail:
		return dispatch.OutcomeError
	case testkit.Panic:
		return dispatch.OutcomePanic
	case testkit.Block:
		return dispatch.OutcomeCancelled // only a force ends it
	}
	return dispatch.OutcomeSuccess
}

// byKeySeq indexes the workload's exchanges.
func byKeySeq(w testkit.Workload) map[testkit.Tag]testkit.Exchange {
	m := make(map[testkit.Tag]testkit.Exchange, len(w.Exchanges))
	for _, x := range w.Exchanges {
		m[testkit.Tag{Key: x.ID.ID, Seq: x.Seq}] = x
	}
	return m
}

// checkOwn checks one path against the workload: nothing lost, each id's
// handled exchanges a prefix of its own in order, each outcome the one its
// behaviour calls for (cancelled only after a force), everything handled
// without a stop.
func (r pathRun) checkOwn(rt *rapid.T, w testkit.Workload) {
	if handled := int64(len(r.calls)); r.emitted != handled+r.discarded {
		rt.Fatalf("%s: emitted %d, handled %d + discarded %d", r.name, r.emitted, handled, r.discarded)
	}
	if err := testkit.GroupSerial(r.calls); err != nil {
		rt.Fatalf("%s: %v", r.name, err)
	}
	xs := byKeySeq(w)
	for key, cs := range r.perKey() {
		for i, c := range cs {
			if c.Seq != i {
				rt.Fatalf("%s: id %s: call %d is seq %d: not a prefix in order", r.name, key, i, c.Seq)
			}
			want := expected(xs[testkit.Tag{Key: key, Seq: c.Seq}])
			if c.Outcome != want && !(w.Stop.Kind.Forces() && c.Outcome == dispatch.OutcomeCancelled) {
				rt.Fatalf("%s: id %s seq %d: outcome %v, want %v", r.name, key, c.Seq, c.Outcome, want)
			}
		}
	}
	if w.Stop.Kind == testkit.StopNone && (r.emitted != int64(len(w.Exchanges)) || r.discarded != 0) {
		rt.Fatalf("%s: without a stop: emitted %d of %d, discarded %d", r.name, r.emitted, len(w.Exchanges), r.discarded)
	}
}

// compareRuns compares the two paths: identical without a stop; on the
// prefix of each id both handled, the same outcomes (but for cancellations).
func compareRuns(rt *rapid.T, w testkit.Workload, a, b pathRun) {
	ka, kb := a.perKey(), b.perKey()
	if w.Stop.Kind == testkit.StopNone {
		if len(ka) != len(kb) {
			rt.Fatalf("%s handled %d ids, %s %d", a.name, len(ka), b.name, len(kb))
		}
		counts := func(r pathRun) (n [4]int) {
			for _, c := range r.calls {
				n[c.Outcome]++
			}
			return n
		}
		if ca, cb := counts(a), counts(b); ca != cb {
			rt.Fatalf("outcome counts: %s %v, %s %v", a.name, ca, b.name, cb)
		}
	}
	for key, as := range ka {
		bs := kb[key]
		if w.Stop.Kind == testkit.StopNone && len(as) != len(bs) {
			rt.Fatalf("id %s: %s handled %d, %s %d", key, a.name, len(as), b.name, len(bs))
		}
		for i := range min(len(as), len(bs)) {
			oa, ob := as[i].Outcome, bs[i].Outcome
			if oa != ob && oa != dispatch.OutcomeCancelled && ob != dispatch.OutcomeCancelled {
				rt.Fatalf("id %s seq %d: %s %v, %s %v", key, as[i].Seq, a.name, oa, b.name, ob)
			}
		}
	}
}

// stopAt returns a handler wrapper that counts calls and a channel closed
// once after calls started (at once for 0).
func stopAt(after int) (count func(), reached <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	var calls atomic.Int64
	if after == 0 {
		once.Do(func() { close(ch) })
	}
	return func() {
		if calls.Add(1) == int64(after) {
			once.Do(func() { close(ch) })
		}
	}, ch
}

// waitStopPoint waits for the stop point: the calls reached, the run ended,
// or no progress for a virtual hour.
func waitStopPoint(reached, done <-chan struct{}) {
	select {
	case <-reached:
	case <-done:
	case <-time.After(stuck):
	}
}

func runLanesPath(rt *rapid.T, p, pool, budget int, w testkit.Workload) pathRun {
	sched, err := schedulers.NewParallel("lanes", pool)
	if err != nil {
		rt.Fatal(err)
	}
	count, reached := stopAt(w.Stop.After)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
		func(ctx context.Context, x testkit.Exchange) error {
			count()
			return testkit.Perform(ctx, x)
		})
	var hooked atomic.Int64
	source, emitted := counted(flux.FromSlice(w.Exchanges))
	d, err := dispatch.New("lanes", orders, source, rec.Handle, quiet,
		dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
		dispatch.WithScheduler(sched),
		dispatch.WithDiscardHook(func(testkit.Exchange, error) { hooked.Add(1) }))
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
		waitStopPoint(reached, d.Done())
	}
	switch w.Stop.Kind {
	case testkit.StopGraceful:
		if err := d.StopGracefully(ctx); err != nil {
			rt.Errorf("lanes: graceful stop: %v", err)
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
			rt.Errorf("lanes: graceful stop taken over by force: %v", err)
		}
	}
	<-d.Done()
	if err := sched.DisposeGracefully(ctx); err != nil {
		rt.Fatal(err)
	}
	s := d.Stats()
	calls := rec.Calls()
	if err := testkit.NoLoss(emitted.Load(), s, calls); err != nil {
		rt.Fatalf("lanes: %v", err)
	}
	if hooked.Load() != s.Discarded {
		rt.Fatalf("lanes: discard hook called %d times, %d discarded", hooked.Load(), s.Discarded)
	}
	return pathRun{name: "lanes", emitted: emitted.Load(), discarded: s.Discarded, calls: calls}
}

// runChainPath runs w through the flux chain. A graceful stop stops the
// source (what was emitted drains); a force cancels the subscription.
func runChainPath(rt *rapid.T, p, pool, buffer int, w testkit.Workload) pathRun {
	sched, err := schedulers.NewParallel("chain", pool)
	if err != nil {
		rt.Fatal(err)
	}
	count, reached := stopAt(w.Stop.After)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
		func(ctx context.Context, x testkit.Exchange) error {
			count()
			return testkit.Perform(ctx, x)
		})
	handle := func(x testkit.Exchange) flux.Flux[struct{}] {
		return flux.Create(func(ctx context.Context, _ flux.Sink[struct{}]) error {
			func() {
				defer func() { _ = recover() }() // a panic is an outcome, recorded
				_ = rec.Handle(ctx, x)
			}()
			return nil
		})
	}
	var discarded, emitted atomic.Int64
	stopSource := make(chan struct{})
	src := flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
		for _, x := range w.Exchanges {
			select {
			case <-stopSource:
				return nil
			default:
			}
			if err := sink.Next(x); err != nil {
				return err
			}
		}
		return nil
	}).DoOnNext(func(testkit.Exchange) { emitted.Add(1) })
	groups := flux.GroupBy(src, func(x testkit.Exchange) int { return x.Tag(p).Group }, p, flux.WithGroupBuffer(buffer))
	chain := flux.DoOnDiscard(flux.FlatMap(groups, func(g flux.GroupedFlux[testkit.Exchange]) flux.Flux[struct{}] {
		return flux.ConcatMap(g.PublishOn(sched, buffer), handle)
	}, p), func(testkit.Exchange, error) { discarded.Add(1) })
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = chain.Subscribe(ctx, func(struct{}) error { return nil })
	}()
	if w.Stop.Kind != testkit.StopNone {
		waitStopPoint(reached, done)
	}
	switch w.Stop.Kind {
	case testkit.StopGraceful:
		close(stopSource)
	case testkit.StopForce:
		cancel(dispatch.ErrForceStopped)
	case testkit.StopForceDuringGraceful:
		close(stopSource)
		select {
		case <-done:
		case <-time.After(w.Stop.ForceAfter):
		}
		cancel(dispatch.ErrForceStopped)
	}
	<-done
	if err := sched.DisposeGracefully(context.Background()); err != nil {
		rt.Fatal(err)
	}
	if runErr != nil && ctx.Err() == nil { // after a force, the flow ends with an error
		rt.Fatalf("chain: %v", runErr)
	}
	return pathRun{name: "chain", emitted: emitted.Load(), discarded: discarded.Load(), calls: rec.Calls()}
}
