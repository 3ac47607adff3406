package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
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
