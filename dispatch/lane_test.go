package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// A handler that panics or calls runtime.Goexit, with a failure log whose
// handler panics too: the exchange is still accounted for once (Failed),
// the next one of its group is handled, and the stop reaches its end. On
// Goexit the exchange was popped but never counted: InFlight stayed 1 and
// the dispatcher never reached Done.
func TestHandlerEndWithPanickingFailureLog(t *testing.T) {
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := schedulers.NewParallel("edge", 2, schedulers.WithLogger(discardLogger))
				require.NoError(t, err)
				defer s.Dispose()
				id := aggregate.NewID(orders, "a")
				d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
					func(ctx context.Context, x testkit.Exchange) error {
						if x.Seq == 0 {
							if how == "panic" {
								panic("handler")
							}
							runtime.Goexit()
						}
						return nil
					}, dispatch.WithScheduler(s),
					dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
				require.NoError(t, err)
				require.NoError(t, d.Prepare(t.Context()))
				require.NoError(t, d.Start())
				for seq := range 2 {
					require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: id, Seq: seq}))
				}
				st, err := edgeStop(t, d)
				require.NoError(t, err, "stats %+v", st)
				require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, st)
			})
		})
	}
}

// Under StopOnError a failed exchange stops the dispatcher, also when the
// failure log's handler panics (the panic goes on up to the scheduler): the
// policy was applied after the log, so the dispatcher kept running.
func TestStopOnErrorWithPanickingFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel("edge", 1, schedulers.WithLogger(discardLogger))
		require.NoError(t, err)
		defer s.Dispose()
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
			func(ctx context.Context, x testkit.Exchange) error { return testkit.ErrInjected },
			dispatch.WithScheduler(s), dispatch.WithErrorPolicy(dispatch.StopOnError),
			dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "a")}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		select {
		case <-d.Done():
		case <-ctx.Done():
			st := d.State()
			d.ForceStop()
			<-d.Done()
			t.Fatalf("the failure did not stop the dispatcher under StopOnError (state %v)", st)
		}
		require.ErrorIs(t, d.Err(), testkit.ErrInjected)
		require.Equal(t, dispatch.Stats{Received: 1, Failed: 1}, d.Stats())
	})
}

// edgeDo is what one exchange of the batch property does.
type edgeDo int

const (
	edgeOK         edgeDo = iota // the handler returns nil
	edgeErr                      // the handler returns an error
	edgePanic                    // the handler panics
	edgeGoexit                   // the handler calls runtime.Goexit
	edgeCtxNil                   // WithContextOf returns nil
	edgeCtxPanic                 // WithContextOf panics
	edgeHookGoexit               // the handler returns nil, the outcome hook calls runtime.Goexit
	edgeDoCount
)

type edgeX struct {
	id  aggregate.ID
	seq int
	do  edgeDo
}

func (x edgeX) AggregateID() aggregate.ID { return x.id }

// Every exchange of a lane's batch is accounted for once whatever its
// neighbours do (return, fail, panic, Goexit in the handler or the hook, a
// failing WithContextOf): the outcome hook once per exchange with the
// expected outcome, the handlers of one id called in order, the ones after
// a panic too, and the Stats exact at the end.
func TestBatchAccountsEveryExchangeOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 4).Draw(rt, "ids")
		groups := rapid.IntRange(1, 3).Draw(rt, "groups")
		goroutines := rapid.IntRange(1, 2).Draw(rt, "goroutines")
		dos := rapid.SliceOfN(rapid.IntRange(0, int(edgeDoCount)-1), 1, 150).Draw(rt, "dos")
		var failure string
		synctest.Test(t, func(t *testing.T) {
			failure = edgeBatchRun(t, ids, groups, goroutines, dos)
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}

func edgeBatchRun(t *testing.T, ids, groups, goroutines int, dos []int) string {
	s, err := schedulers.NewParallel("edge", goroutines, schedulers.WithLogger(discardLogger))
	if err != nil {
		return err.Error()
	}
	defer s.Dispose()
	var mu sync.Mutex
	handled := map[string][]int{}
	hooked := map[[2]int]int{} // (id, seq) -> calls
	outcome := map[[2]int]dispatch.Outcome{}
	idx := func(x edgeX) [2]int { return [2]int{int(x.id.ID[0] - 'a'), x.seq} }
	injected := errors.New("injected")
	d, err := dispatch.New[edgeX]("orders", orders, nil,
		func(ctx context.Context, x edgeX) error {
			mu.Lock()
			handled[x.id.ID] = append(handled[x.id.ID], x.seq)
			mu.Unlock()
			switch x.do {
			case edgeErr:
				return injected
			case edgePanic:
				panic(injected)
			case edgeGoexit:
				runtime.Goexit()
			}
			return nil
		},
		quietOf[edgeX](), dispatch.WithScheduler(s), dispatch.WithParallelism(groups),
		dispatch.WithContextOf(func(ctx context.Context, x edgeX) context.Context {
			switch x.do {
			case edgeCtxNil:
				return nil
			case edgeCtxPanic:
				panic(injected)
			}
			return ctx
		}),
		dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[edgeX]) {
			mu.Lock()
			hooked[idx(r.Exchange)]++
			outcome[idx(r.Exchange)] = r.Outcome
			mu.Unlock()
			if r.Exchange.do == edgeHookGoexit {
				runtime.Goexit()
			}
		}))
	if err != nil {
		return err.Error()
	}
	if err := d.Prepare(t.Context()); err != nil {
		return err.Error()
	}
	if err := d.Start(); err != nil {
		return err.Error()
	}
	seqs := make([]int, ids)
	var want dispatch.Stats
	wantHandled := map[string][]int{}
	wantOutcome := map[[2]int]dispatch.Outcome{}
	for i, do := range dos {
		id := i % ids
		x := edgeX{id: aggregate.NewID(orders, string(rune('a'+id))), seq: seqs[id], do: edgeDo(do)}
		seqs[id]++
		if err := d.Emit(t.Context(), x); err != nil {
			return err.Error()
		}
		want.Received++
		o := dispatch.OutcomePanic
		switch x.do {
		case edgeOK, edgeHookGoexit:
			o = dispatch.OutcomeSuccess
			want.Succeeded++
		case edgeErr:
			o = dispatch.OutcomeError
			want.Failed++
		default:
			want.Failed++
		}
		if x.do != edgeCtxNil && x.do != edgeCtxPanic {
			wantHandled[x.id.ID] = append(wantHandled[x.id.ID], x.seq)
		}
		wantOutcome[idx(x)] = o
	}
	st, err := edgeStop(t, d)
	if err != nil {
		<-d.Done()
		return fmt.Sprintf("stop: %v (stats %+v)", err, st)
	}
	if st != want {
		return fmt.Sprintf("stats %+v, want %+v", st, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, w := range wantHandled {
		if fmt.Sprint(handled[id]) != fmt.Sprint(w) {
			return fmt.Sprintf("id %s handled %v, want %v", id, handled[id], w)
		}
	}
	for k, o := range wantOutcome {
		if hooked[k] != 1 || outcome[k] != o {
			return fmt.Sprintf("exchange %v: hook called %d times, outcome %v, want once with %v", k, hooked[k], outcome[k], o)
		}
	}
	return ""
}

// A lent scheduler disposed by force while every goroutine of it is busy
// with someone else's task that ignores its ctx: the dispatcher learns of it
// from the scheduler's Context, discards the lanes whose tasks were dropped,
// and stops with schedulers.ErrRejected, without waiting for that task.
func TestLentSchedulerDisposedWhileBusyIsNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("busy", 1)
		require.NoError(t, err)
		busy, release := make(chan struct{}), make(chan struct{})
		require.NoError(t, sched.Schedule(func(context.Context) { close(busy); <-release }))
		<-busy
		d := started(t, flux.FromSlice(exchanges(10, 5)), testkit.Perform,
			dispatch.WithScheduler(sched))
		synctest.Wait()
		sched.Dispose() // drops the probe and the lane tasks, cancels the task ctx
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("an hour after its scheduler was disposed the dispatcher is %v with %+v and Err %v",
				d.State(), d.Stats(), d.Err())
		}
		close(release)
		<-sched.Done()
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: 10, Discarded: 10}, d.Stats())
		assert.ErrorIs(t, d.Err(), schedulers.ErrRejected)
	})
}

// A running lane stops handling its batch as soon as its lent scheduler is
// disposed by force: the rest of the batch is discarded, not handed to the
// handler with a cancelled context.
func TestLaneBatchStopsAtForcedDisposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("edge", 1, schedulers.WithLogger(discardLogger))
		require.NoError(t, err)
		first, release := make(chan struct{}), make(chan struct{})
		var calls, afterCancel atomic.Int64
		d := started(t, flux.FromSlice(exchanges(100, 1)), func(ctx context.Context, x testkit.Exchange) error {
			calls.Add(1)
			if x.Seq == 0 {
				close(first)
				<-release // a call in progress that does not watch ctx
				return nil
			}
			if ctx.Err() != nil {
				afterCancel.Add(1)
			}
			return ctx.Err()
		}, dispatch.WithScheduler(sched))
		<-first
		synctest.Wait() // the source is read to its end: 99 exchanges queued behind the first
		sched.Dispose()
		synctest.Wait() // the dispatcher has seen the disposal
		close(release)
		<-d.Done()
		<-sched.Done()
		s := d.Stats()
		assert.EqualValues(t, 1, calls.Load(), "handler calls after the forced disposal (%d with a cancelled ctx); %+v", afterCancel.Load(), s)
		assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 1, Discarded: 99}, s)
	})
}

// WithOutcomeHook and the Observer's doc: an exchange whose hook (or
// Finished) ends its goroutine with runtime.Goexit is accounted for as if
// the call had returned. Under StopOnError a failed exchange then stops the
// dispatcher with that failure as Err, as it does when the hook returns.
func TestStopOnErrorHoldsWhenAHookOrFinishedGoexits(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]dispatch.Option[int]{
		"outcome hook": dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[int]) { runtime.Goexit() }),
		"Finished":     dispatch.WithObserver(goexitOnFinished{&countingObserver{}}),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				xs := make([]int, 100)
				for i := range xs {
					xs[i] = i
				}
				d := startedKeyed(t, flux.FromSlice(xs), func(i int) int { return 0 }, func(_ context.Context, i int) error {
					if i == 3 {
						return errBoom
					}
					return nil
				}, opt, dispatch.WithErrorPolicy(dispatch.StopOnError), dispatch.WithMaxPending(1))
				<-d.Done()
				require.ErrorIs(t, d.Err(), errBoom, "StopOnError: the first failure is Err")
				s := d.Stats()
				assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
				// One pending at a time: the stop comes before the next admission.
				assert.Equal(t, int64(3), s.Succeeded, "the failure stopped the dispatcher")
				assert.Equal(t, int64(1), s.Failed)
			})
		})
	}
}

// edgeAsideChild names the test the child process runs.
const edgeAsideChild = "AGGFLOW_BRK_ASIDE_CHILD"

// A discard hook that panics (or calls runtime.Goexit), logged by a log handler that panics too: the
// discarding goes on, the exchange is counted once, the dispatcher reaches
// its end and the process lives. The hooks of a discarded exchange run on a
// goroutine of their own, where nothing recovered the log handler's panic:
// the process crashed. The scenario runs in a child process so that a crash
// fails this test rather than the test binary.
func TestDiscardHookWithPanickingLogDoesNotCrash(t *testing.T) {
	if how := os.Getenv(edgeAsideChild); how != "" {
		edgeAsideScenario(t, how)
		return
	}
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDiscardHookWithPanickingLogDoesNotCrash$", "-test.count=1")
			cmd.Env = append(os.Environ(), edgeAsideChild+"="+how)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child process:\n%s", out)
		})
	}
}

func edgeAsideScenario(t *testing.T, how string) {
	release := make(chan struct{})
	started := make(chan struct{})
	d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
		func(ctx context.Context, x testkit.Exchange) error {
			if x.Seq == 0 {
				close(started)
				<-release
			}
			return nil
		},
		dispatch.WithParallelism(2), dispatch.WithScheduler(newParallel(t, 1)),
		dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: hook panicked"})),
		dispatch.WithDiscardHook(func(testkit.Exchange, error) {
			if how == "Goexit" {
				runtime.Goexit()
			}
			panic("discard hook")
		}))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	// "a" is group 1 and "b" group 0 of 2: b's exchange waits for the one
	// scheduler goroutine, which a's handler holds, and ForceStop discards it.
	require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: 0}))
	<-started
	require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "b"), Seq: 1}))
	d.ForceStop()
	close(release)
	<-d.Done()
	st := d.Stats()
	require.Equal(t, st.Received, st.Succeeded+st.Failed+st.Discarded, "%+v", st)
	require.Equal(t, dispatch.Stats{Received: 2, Succeeded: st.Succeeded, Failed: st.Failed, Discarded: 1}, st)
}

// A dispatcher on a lent scheduler costs the goroutines of one on a
// scheduler it owns: none waits for the lent one's end, which still reaches
// it (TestLentSchedulerDisposedWhileBusyIsNoticed and the tests of a lent
// scheduler's disposal).
func TestLentSchedulerCostsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idle := flux.Create(func(ctx context.Context, _ flux.Sink[testkit.Exchange]) error {
			<-ctx.Done() // an idle source: subscribed, emitting nothing
			return nil
		})
		goroutines := func(opts ...dispatch.Option[testkit.Exchange]) int {
			before := runtime.NumGoroutine()
			d := started(t, idle, testkit.Perform, opts...)
			synctest.Wait()
			n := runtime.NumGoroutine() - before
			d.Quiesce()
			<-d.Done()
			return n
		}
		sched, err := schedulers.NewParallel("lent", 2)
		require.NoError(t, err)
		owned := goroutines()
		lent := goroutines(dispatch.WithScheduler(sched))
		assert.Equal(t, owned, lent, "goroutines of a dispatcher on a lent scheduler and on an owned one")
		assert.Equal(t, 1, owned, "the source's")
		require.NoError(t, sched.DisposeGracefully(context.Background()))
	})
}

// A lent scheduler that ends under a running dispatcher stops it with the
// scheduler's error, even when the exchanges that end lets finish (the one
// whose handler waited on its context, the rest discarded) all end, and the
// source returns, before the reaction to that end goes on: the error is
// recorded first. The hook runs on the callback's goroutine: it asserts
// rather than requires, since FailNow belongs to the test's goroutine.
func TestASchedulerEndUnderTheDispatcherIsItsErrorThoughEverythingEndsFirst(t *testing.T) {
	sched, err := schedulers.NewParallel("lent", 1)
	require.NoError(t, err)
	in := make(chan testkit.Exchange)
	blocked := make(chan struct{})
	var d *dispatch.Dispatcher[testkit.Exchange]
	restore := dispatch.SetTestHookSchedulerEnded(func() {
		close(in) // the source ends; the exchanges end: the dispatcher drains
		assert.Eventually(t, func() bool {
			st := d.Stats()
			return st.Received == 3 && st.InFlight == 0
		}, 10*time.Second, time.Millisecond, "the exchanges did not all end")
	})
	defer restore()
	d = started(t, flux.FromChannel(in), func(ctx context.Context, x testkit.Exchange) error {
		if x.Seq == 0 {
			close(blocked)
			<-ctx.Done() // until the scheduler's end reaches the handlers
			return ctx.Err()
		}
		return nil
	}, dispatch.WithScheduler(sched))
	id := aggregate.NewID(orders, "a")
	for seq := range 3 { // 1 and 2 wait behind 0 in its lane
		in <- testkit.Exchange{ID: id, Seq: seq}
	}
	<-blocked
	sched.Dispose()
	<-d.Done()
	<-sched.Done()
	assert.ErrorIs(t, d.Err(), schedulers.ErrRejected)
	assert.ErrorIs(t, d.Err(), schedulers.ErrDisposed)
	st := d.Stats()
	assert.Equal(t, dispatch.Stats{Received: 3, Failed: 1, Discarded: 2}, st)
}

// One slow aggregate holds part of the pending budget, never the other
// groups: while fewer than the budget are pending, the exchanges of the
// other ids are handled at once. Here the slow id has more exchanges queued
// (40) than the earlier per-group buffer held (32), where the router then
// waited on the slow group's full queue and every other group stalled.
func TestSlowAggregateDoesNotStallTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow, others, budget = 40, 400, 64
		const p = 64
		slowID := aggregate.NewID(orders, "slow")
		var fast []aggregate.ID // 13 ids, none in the slow id's group
		for k := 0; len(fast) < 13; k++ {
			if id := aggregate.NewID(orders, "fast-"+strconv.Itoa(k)); id.Mod(p) != slowID.Mod(p) {
				fast = append(fast, id)
			}
		}
		var xs []testkit.Exchange
		for i := range slow + others {
			if i%11 == 0 && i/11 < slow {
				xs = append(xs, testkit.Exchange{ID: slowID, Seq: i / 11, Do: testkit.Delay, Delay: time.Hour})
				continue
			}
			xs = append(xs, testkit.Exchange{ID: fast[i%len(fast)], Seq: i})
		}
		require.Len(t, xs, slow+others)
		start := time.Now()
		var fastDone atomic.Int64
		var lastFast time.Duration
		d := started(t, flux.FromSlice(xs), func(ctx context.Context, x testkit.Exchange) error {
			err := testkit.Perform(ctx, x)
			if x.ID != slowID && fastDone.Add(1) == others {
				lastFast = time.Since(start)
			}
			return err
		}, dispatch.WithParallelism(p), dispatch.WithMaxPending(budget),
			dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait() // the slow handler sleeps; everything else that could run has run
		assert.EqualValues(t, others, fastDone.Load(), "every other exchange was handled while the slow one sleeps")
		assert.Zero(t, lastFast, "without waiting for the slow aggregate")
		s := d.Stats()
		assert.Equal(t, int64(slow+others), s.Received, "the source was read to its end")
		assert.Equal(t, int64(slow), s.InFlight, "only the slow aggregate's exchanges are pending")
		<-d.Done()
		assert.Equal(t, time.Duration(slow)*time.Hour, time.Since(start), "the slow aggregate took its time, serially")
		assert.Equal(t, dispatch.Stats{Received: slow + others, Succeeded: slow + others}, d.Stats())
	})
}

// Once the slow aggregate holds the whole budget, the intake waits: the
// budget is the one memory bound, shared by every group.
func TestSlowAggregateHoldingTheBudgetHoldsTheIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget = 8
		src := &countingSource{}
		slowID := aggregate.NewID(orders, "slow")
		d := started(t, src.flux(-1, func(i int) testkit.Exchange {
			if i < budget {
				return testkit.Exchange{ID: slowID, Seq: i, Do: testkit.Block}
			}
			return testkit.Exchange{ID: aggregate.NewID(orders, "fast"), Seq: i - budget}
		}), testkit.Perform, dispatch.WithMaxPending(budget),
			dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait()
		assert.Equal(t, dispatch.Stats{Received: budget, InFlight: budget}, d.Stats(),
			"the slow id's exchanges; the one the intake holds while it waits for room is received once admitted or refused")
		d.ForceStop()
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: budget + 1, Failed: 1, Discarded: budget}, d.Stats())
	})
}

// A running dispatcher costs the scheduler's goroutines and its one intake
// goroutine, whatever the number of groups and ids: none per group, none per
// id, none per exchange.
func TestNoGoroutinePerGroup(t *testing.T) {
	const groups, ids, pool = 20_000, 5_000, 4
	sched := newParallel(t, pool)
	baseline := runtime.NumGoroutine()
	xs := make([]testkit.Exchange, ids)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "id-"+strconv.Itoa(i))}
	}
	handled := make(chan struct{})
	var n atomic.Int64
	release := make(chan struct{})
	// The source emits every id once, then waits, as an idle broker does.
	src := flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
		for _, x := range xs {
			if err := sink.Next(x); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil
	})
	d := started(t, src, func(context.Context, testkit.Exchange) error {
		if n.Add(1) == ids {
			close(handled)
		}
		return nil
	}, dispatch.WithParallelism(groups), dispatch.WithScheduler(sched))
	<-handled
	got := runtime.NumGoroutine()
	assert.LessOrEqual(t, got, baseline+pool+2, "goroutines: %d before, %d with %d groups and %d idle ids", baseline, got, groups, ids)
	close(release)
	<-d.Done()
	assert.Equal(t, dispatch.Stats{Received: ids, Succeeded: ids}, d.Stats())
}

// A scheduler its owner disposes by force before any task of the dispatcher
// ran (here every goroutine of it was busy) drops the dispatcher's queued
// lane tasks. The exchanges in those lanes must still end (discarded with
// schedulers.ErrRejected), and the dispatcher with them, without a force of
// its own.
func TestSchedulerDisposedBeforeAnyLaneRanEndsTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, err := schedulers.NewParallel("busy", 1)
		require.NoError(t, err)
		busy := make(chan struct{})
		require.NoError(t, sched.Schedule(func(ctx context.Context) { close(busy); <-ctx.Done() }))
		<-busy // the scheduler's only goroutine is taken
		obs := &countingObserver{}
		d := started(t, flux.FromSlice(exchanges(10, 5)), testkit.Perform,
			dispatch.WithScheduler(sched), dispatch.WithObserver(obs))
		synctest.Wait() // the source completed; five lanes wait for the scheduler
		assert.Equal(t, dispatch.Stats{Received: 10, InFlight: 10}, d.Stats())
		sched.Dispose() // drops the queued lane tasks
		<-sched.Done()
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Fatalf("the dispatcher did not end an hour after its scheduler was disposed: state %v, %+v", d.State(), d.Stats())
		}
		assert.Equal(t, dispatch.Stats{Received: 10, Discarded: 10}, d.Stats())
		assert.True(t, every(obs.reasons, schedulers.ErrRejected), "discarded for the refusal: %v", obs.reasons)
		assert.ErrorIs(t, d.Err(), schedulers.ErrRejected, "the refusal is the dispatcher's error")
	})
}

// A handler's Goexit on the Immediate scheduler ends the goroutine that
// called Schedule: the dispatcher's own source goroutine. The dispatcher
// must not stay RUNNING with nobody pulling its source: it ends, with every
// exchange accounted for and the Goexit as its error.
func TestHandlerGoexitOnImmediateSchedulerEndsTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		d := started(t, flux.FromSlice(exchanges(10, 2)), func(context.Context, testkit.Exchange) error {
			if calls.Add(1) == 3 {
				runtime.Goexit()
			}
			return nil
		}, dispatch.WithScheduler(schedulers.Immediate()))
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("the dispatcher did not end after its source goroutine exited: state %v, %+v", d.State(), d.Stats())
		}
		s := d.Stats()
		assert.Zero(t, s.InFlight)
		assert.EqualValues(t, 1, s.Failed, "the Goexit failed its exchange")
		assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		assert.ErrorIs(t, d.Err(), schedulers.ErrGoexit, "the source stopped early: that is an error")
	})
}

// recordingHandler is a slog.Handler that keeps every record, with the
// logTraceKey value of its ctx.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
	traces  []any
}

// logTraceKey marks the ctx a record was logged with.
type logTraceKey struct{}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	h.traces = append(h.traces, ctx.Value(logTraceKey{}))
	return nil
}

// withMessage returns the records with message msg.
func (h *recordingHandler) withMessage(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rs []slog.Record
	for _, r := range h.records {
		if r.Message == msg {
			rs = append(rs, r)
		}
	}
	return rs
}

// attr returns the value of r's attribute key.
func attr(r slog.Record, key string) (v slog.Value, ok bool) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}

// An exchange whose AggregateID panics fails alone in a Dispatcher, as in a
// MainDispatcher, also when the failure is logged: logging it must not call
// AggregateID again unguarded (the panic would escape onto the source's
// goroutine and end the source).
func TestAggregateIDPanicFailsOneExchangeWithALogger(t *testing.T) {
	xs := make([]panickyID, 100)
	for i := range xs {
		xs[i] = panickyID{id: itoa(i % 7), bad: i == 50}
	}
	logs := &recordingHandler{}
	obs := &countingObserver{}
	d := started(t, flux.FromSlice(xs), func(context.Context, panickyID) error { return nil },
		dispatch.WithParallelism(4), dispatch.WithObserver(obs),
		dispatch.WithLogger(slog.New(logs)))
	<-d.Done()
	assert.NoError(t, d.Err(), "the source did not fail")
	assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 99, Failed: 1}, d.Stats())
	require.EqualValues(t, 1, obs.finished[dispatch.OutcomeError].Load())
	assert.ErrorIs(t, obs.errs[0], dispatch.ErrInvalidGroupKey)
	assert.Len(t, logs.withMessage("dispatch: exchange failed"), 1, "the failure is logged")
}

// refusingScheduler counts the tasks scheduled and refuses them once told,
// as an owned scheduler does once its owner disposes it after the run.
type refusingScheduler struct {
	schedulers.Scheduler
	scheduled atomic.Int64
	refuse    atomic.Bool
}

func (s *refusingScheduler) Schedule(task schedulers.Task) error {
	s.scheduled.Add(1)
	if s.refuse.Load() {
		return schedulers.ErrRejected
	}
	return s.Scheduler.Schedule(task)
}

// A consumer leaving its lane looks again once it went idle, for a push that
// saw the lane running. In that window the push can kick the lane, another
// consumer drain it and leave: the look-again then wins an empty lane. It
// must not schedule it: that task comes after the last exchange ended, and a
// run whose owned scheduler is being disposed then failed with "scheduler
// refused work" though every exchange succeeded (10-12 runs in 2,000).
func TestLookAgainAfterAnotherConsumerDrainedSchedulesNothing(t *testing.T) {
	pool, err := schedulers.NewParallel("leave", 2)
	require.NoError(t, err)
	t.Cleanup(func() { pool.Dispose(); <-pool.Done() })
	sched := &refusingScheduler{Scheduler: pool}

	var d *dispatch.Dispatcher[int]
	var calls atomic.Int32
	secondIdle := make(chan struct{})
	secondErr := make(chan error, 1)
	restore := dispatch.SetTestHookIdle(func() {
		switch calls.Add(1) {
		case 1: // the first consumer, idle after exchange 1: exchange 2 comes
			secondErr <- d.Emit(context.Background(), 2)
			select {
			case <-secondIdle: // another consumer drained exchange 2 and left
			case <-time.After(hang):
				panic("exchange 2 was not drained by another consumer")
			}
			sched.refuse.Store(true) // every exchange ended: the owner disposes
		case 2:
			close(secondIdle)
		}
	})
	d = startedKeyed(t, nil, func(int) int { return 0 }, func(context.Context, int) error { return nil },
		dispatch.WithScheduler(sched))
	require.NoError(t, d.Emit(t.Context(), 1))
	require.NoError(t, <-secondErr)
	require.NoError(t, d.StopGracefully(t.Context()))
	require.NoError(t, pool.DisposeGracefully(t.Context())) // the first consumer's task returned
	restore()
	assert.NoError(t, d.Err(), "a run whose every exchange succeeded")
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	assert.Equal(t, int64(2), sched.scheduled.Load(), "one task per kick, none for the empty lane")
}

// gatedScheduler holds back the first task scheduled once armed until
// released: the lane stays ready meanwhile.
type gatedScheduler struct {
	schedulers.Scheduler
	armed   atomic.Bool
	release chan struct{}
}

func (s *gatedScheduler) Schedule(task schedulers.Task) error {
	if s.armed.CompareAndSwap(true, false) {
		<-s.release
	}
	return s.Scheduler.Schedule(task)
}

// A consumer whose look-again finds an exchange pushed as it left takes the
// lane back and reschedules it. A force stop's sweep, unsynchronised with
// the consumer, steals the lane while it is ready: the consumer must have
// read the queue before, as its consumer, or the two read and pop it at
// once (-race fails).
func TestLookAgainRaceFreeWithAForceStopsSweep(t *testing.T) {
	for range 20 {
		pool, err := schedulers.NewParallel("leave", 2)
		require.NoError(t, err)
		t.Cleanup(func() { pool.Dispose(); <-pool.Done() })
		sched := &gatedScheduler{Scheduler: pool, release: make(chan struct{})}
		var d *dispatch.Dispatcher[int]
		var marks atomic.Int32
		secondErr := make(chan error, 1)
		restore := dispatch.SetTestHookMark(func() {
			if marks.Add(1) == 1 { // the consumer, leaving after exchange 1: exchange 2 sees it running
				sched.armed.Store(true)
				secondErr <- d.Emit(context.Background(), 2)
			}
		})
		d = startedKeyed(t, nil, func(int) int { return 0 }, func(context.Context, int) error { return nil },
			dispatch.WithScheduler(sched))
		require.NoError(t, d.Emit(t.Context(), 1))
		require.NoError(t, <-secondErr)
		d.ForceStop() // no signal from the consumer: nothing orders its look-again before this sweep
		close(sched.release)
		<-d.Done()
		require.NoError(t, pool.DisposeGracefully(t.Context())) // the consumer's task returned
		restore()
		assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Discarded: 1}, d.Stats(), "exchange 2 is discarded")
	}
}
