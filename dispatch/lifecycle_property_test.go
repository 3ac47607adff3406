package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// The lifecycle properties: random interleavings, from two or three
// goroutines, of Prepare, Start, Quiesce, StopGracefully (random deadlines),
// ForceStop and Run, in virtual time, on a dispatcher fed by a finite, an
// endless, a ctx-ignoring, a panicking or a failing source, or by Emit
// goroutines, with handlers that succeed, fail, panic, wait, block until a
// release or until their ctx ends. Every call returns within its bound;
// after the releases and a final ForceStop, Done closes and the state is
// STOPPED; every Stats snapshot, read all along, keeps the identity and no
// counter decreases; once done nothing is in flight, the discard hook and
// the Observer saw every discarded exchange, the Observer every received
// one, and each id's exchanges were handled in order, each group's one at a
// time. Handlers may also stop or force their own dispatcher: the first
// returns ErrIllegalState at once, the second returns at once. The bubble
// fails on any goroutine left behind.
//
// Under -race they fail while two Prepare calls can run at once (see
// TestLifecycleConcurrentPrepareIsRefused): the Run and Prepare calls they
// interleave race on the engines' fields.

// lpCalls draws the calls of two or three goroutines on targets targets.
// Most often the first goroutine begins with Prepare and Start, or Run, on
// the first target, so that most cases run before they stop.
func lpCalls(t *rapid.T, targets int) [][]lpOp {
	calls := make([][]lpOp, rapid.IntRange(2, 3).Draw(t, "callers"))
	for g := range calls {
		calls[g] = lpDrawOps(t, "calls", targets)
	}
	pause := time.Duration(rapid.IntRange(0, 10).Draw(t, "start pause ms")) * time.Millisecond
	within := time.Duration(rapid.IntRange(0, 120).Draw(t, "run ms")) * time.Millisecond
	switch rapid.IntRange(0, 9).Draw(t, "start") {
	case 0, 1, 2, 3, 4:
		calls[0] = append([]lpOp{{op: "Prepare", pause: pause}, {op: "Start"}}, calls[0]...)
	case 5, 6, 7:
		calls[0] = append([]lpOp{{op: "Run", pause: pause, within: within}}, calls[0]...)
	}
	return calls
}

// lpChild numbers the children of a MainDispatcher of orders and invoices.
func lpChild(x testkit.Exchange) int {
	if x.ID.Named == invoices {
		return 1
	}
	return 0
}

// A Dispatcher, on a scheduler of its own or a lent one.
func TestLifecyclePropertyDispatcher(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh := lpDrawShape(t)
		spec := lpDrawProbe(t, "dispatcher", "d", []aggregate.MaterializedNamedAggregate{orders})
		pool := rapid.IntRange(0, 3).Draw(t, "lent pool (0: owned)")
		calls := lpCalls(t, 1)
		end := lpDrawEnding(t)
		for range lpRepeats {
			rapid.SyncTest(t, func(t *rapid.T) {
				w := lpNewWorld()
				p := spec.fresh()
				p.recorder(w, sh.groups, func(testkit.Exchange) int { return 0 })
				opts := p.options(w, sh)
				var sched schedulers.Scheduler
				if pool > 0 {
					var err error
					if sched, err = schedulers.NewParallel("lp-lent", pool); err != nil {
						t.Fatal(err)
					}
					opts = append(opts, dispatch.WithScheduler(sched))
				}
				d, err := dispatch.New("lp-dispatcher", orders, p.source(w), p.rec.Handle, opts...)
				if err != nil {
					t.Fatal(err)
				}
				p.watch(d)
				lpPlay(t, w, []lpTarget{d}, []lpBound{{runFor: sh.stopTimeout}}, []*lpProbe{p}, calls, end)
				if sched != nil {
					sched.Dispose()
					<-sched.Done()
				}
			})
		}
	})
}

// A MainDispatcher of two named aggregates (and, at times, exchanges of a
// third it has no lanes for), on a lent supplier.
func TestLifecyclePropertyMain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh := lpDrawShape(t)
		named := []aggregate.MaterializedNamedAggregate{orders, invoices}
		if rapid.IntRange(0, 3).Draw(t, "unknown aggregate") == 0 {
			named = append(named, payments)
		}
		spec := lpDrawProbe(t, "main", "m", named)
		pool := rapid.IntRange(1, 3).Draw(t, "supplier parallelism")
		calls := lpCalls(t, 1)
		end := lpDrawEnding(t)
		for range lpRepeats {
			rapid.SyncTest(t, func(t *rapid.T) {
				w := lpNewWorld()
				p := spec.fresh()
				sup, err := aggregate.NewSchedulerSupplier("lp", aggregate.WithParallelism(pool), aggregate.WithLogger(discardLogger))
				if err != nil {
					t.Fatal(err)
				}
				p.recorder(w, sh.groups, lpChild)
				m, err := dispatch.NewMain("lp-main", []aggregate.NamedAggregate{orders, invoices}, p.source(w),
					p.rec.Handle, sup, p.options(w, sh)...)
				if err != nil {
					t.Fatal(err)
				}
				p.watch(m)
				lpPlay(t, w, []lpTarget{m}, []lpBound{{runFor: sh.stopTimeout}}, []*lpProbe{p}, calls, end)
				// The supplier is lent: its owner stops it, at once since
				// nothing runs on it any more.
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancel()
				if err := sup.StopGracefully(ctx); err != nil {
					t.Errorf("the lent supplier's graceful stop: %v", err)
				}
			})
		}
	})
}

// A Runtime of a Dispatcher and a MainDispatcher that borrow the supplier
// the Runtime owns (Wow's CompositeEventDispatcher); some calls go to the
// children directly.
func TestLifecyclePropertyRuntime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh := lpDrawShape(t)
		specD := lpDrawProbe(t, "dispatcher", "d", []aggregate.MaterializedNamedAggregate{orders})
		specM := lpDrawProbe(t, "main", "m", []aggregate.MaterializedNamedAggregate{orders, invoices})
		pool := rapid.IntRange(1, 3).Draw(t, "supplier parallelism")
		timeout := time.Duration(rapid.IntRange(1, 50).Draw(t, "shutdown timeout ms")) * time.Millisecond
		calls := lpCalls(t, 3)
		end := lpDrawEnding(t)
		for range lpRepeats {
			rapid.SyncTest(t, func(t *rapid.T) {
				w := lpNewWorld()
				pd, pm := specD.fresh(), specM.fresh()
				sup, err := aggregate.NewSchedulerSupplier("lp", aggregate.WithParallelism(pool), aggregate.WithLogger(discardLogger))
				if err != nil {
					t.Fatal(err)
				}
				pd.recorder(w, sh.groups, func(testkit.Exchange) int { return 0 })
				d, err := dispatch.New("lp-dispatcher", orders, pd.source(w), pd.rec.Handle,
					append(pd.options(w, sh), dispatch.WithSchedulerSupplier(sup))...)
				if err != nil {
					t.Fatal(err)
				}
				pd.watch(d)
				pm.recorder(w, sh.groups, lpChild)
				m, err := dispatch.NewMain("lp-main", []aggregate.NamedAggregate{orders, invoices}, pm.source(w),
					pm.rec.Handle, sup, pm.options(w, sh)...)
				if err != nil {
					t.Fatal(err)
				}
				pm.watch(m)
				r, err := component.NewRuntime("lp-runtime", []component.Component{d, m},
					component.WithOwned(sup), component.WithShutdownTimeout(timeout))
				if err != nil {
					t.Fatal(err)
				}
				child := lpBound{runFor: sh.stopTimeout}
				lpPlay(t, w, []lpTarget{r, d, m}, []lpBound{{runFor: timeout, limit: timeout}, child, child},
					[]*lpProbe{pd, pm}, calls, end)
				if !testkit.Closed(sup.Done()) {
					t.Error("the owned supplier is not done once the Runtime is")
				}
			})
		}
	})
}

// lpGatedSupplier hands out Immediate; its first GetOrInitialize waits, once
// entered, for the release.
type lpGatedSupplier struct {
	calls            atomic.Int32
	entered, release chan struct{}
}

func (s *lpGatedSupplier) GetOrInitialize(aggregate.NamedAggregate) (schedulers.Scheduler, error) {
	if s.calls.Add(1) == 1 {
		close(s.entered)
		<-s.release
	}
	return schedulers.Immediate(), nil
}

// A Prepare called while another one is in progress (the first waits in the
// supplier) is refused with ErrIllegalState, as one called after it returned
// is; the first one then completes. Found by the lifecycle properties under
// -race: Enter("prepare", StateNew) only takes a hold, so both calls
// resolve, both ask the supplier and write the engines' scheduler and
// contexts, and the slower one returns ErrStopped though nothing stopped
// the dispatcher.
func TestLifecycleConcurrentPrepareIsRefused(t *testing.T) {
	for _, kind := range []string{"dispatcher", "main dispatcher"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sup := &lpGatedSupplier{entered: make(chan struct{}), release: make(chan struct{})}
				var c interface {
					lpTarget
					Stats() dispatch.Stats
				}
				var err error
				if kind == "dispatcher" {
					c, err = dispatch.New("lp-prepare", orders, flux.Empty[testkit.Exchange](), testkit.Perform, quiet,
						dispatch.WithSchedulerSupplier(sup))
				} else {
					c, err = dispatch.NewMain("lp-prepare", []aggregate.NamedAggregate{orders}, flux.Empty[testkit.Exchange](),
						testkit.Perform, sup, quiet)
				}
				require.NoError(t, err)
				first := make(chan error, 1)
				go func() { first <- c.Prepare(context.Background()) }()
				<-sup.entered
				second := c.Prepare(context.Background())
				close(sup.release)
				assert.ErrorIs(t, second, dispatch.ErrIllegalState, "a Prepare while another one is in progress")
				assert.NoError(t, <-first, "the Prepare in progress")
				assert.Equal(t, int32(1), sup.calls.Load(), "the supplier asked once")
				assert.Equal(t, component.StatePrepared, c.State())
				c.ForceStop()
				<-c.Done()
			})
		})
	}
}

// lpEmitter is the dispatcher of the Emit tests: push mode, Immediate, so
// that a handler runs on the goroutine of the Emit that admitted it.
func lpEmitter(t *testing.T, h dispatch.Handler[testkit.Exchange], opts ...dispatch.Option[testkit.Exchange]) *dispatch.Dispatcher[testkit.Exchange] {
	t.Helper()
	return started(t, nil, h, append([]dispatch.Option[testkit.Exchange]{
		dispatch.WithScheduler(schedulers.Immediate()),
		dispatch.WithParallelism(16),
	}, opts...)...)
}

// An Emit for another group, with room in the budget, does not wait for a
// handler that runs inside another Emit (on Immediate the group's drain,
// hence its handler, runs inside Schedule, on the emitting goroutine): no
// lock is held across a call into foreign code, and one slow id does not
// stall the others. Found reading Emit for the lifecycle properties' push
// mode: Emit holds its producer lock (intake.emitMu) across e.push, that is
// Observer.Admitted and Scheduler.Schedule; the second Emit waits on that
// sync.Mutex, deaf to its ctx and invisible to synctest, until the first
// handler returned. (A
// handler that emits a follow-up on its own push-mode dispatcher under
// Immediate deadlocks on it for good.)
func TestLifecycleEmitDoesNotWaitForAnotherEmitsHandler(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	d := lpEmitter(t, func(_ context.Context, x testkit.Exchange) error {
		if x.ID.ID == "slow" { // group 1 of 16
			close(entered)
			<-release
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- d.Emit(context.Background(), testkit.Exchange{ID: aggregate.NewID(orders, "slow")}) }()
	<-entered
	second := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() { second <- d.Emit(ctx, testkit.Exchange{ID: aggregate.NewID(orders, "fast")}) }() // group 12
	select {
	case err := <-second:
		assert.NoError(t, err)
		second <- nil
	case <-time.After(2 * time.Second):
		t.Error("an Emit for another group, with room in the budget and a ctx that ended after 50ms, " +
			"was still waiting after 2s for a handler running inside another Emit")
	}
	close(release)
	assert.NoError(t, <-first)
	<-second
	require.NoError(t, d.StopGracefully(context.Background()))
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
}

// An Emit refused because the intake shut meanwhile leaves the counters
// alone: Received never decreases from one snapshot to the next, and once
// Done closed InFlight stays 0. Emit counts the exchange in Received before
// it looks at the gate, and takes it back when the gate is shut: a snapshot
// in between sees Received one higher than the next, and InFlight 1, also
// after Done (nothing holds Done open for an Emit in progress). The window
// holds no call into user code, so this test cannot force it: it repeats a
// race (sixteen Emit callers waiting for room in a budget of 1 when a
// Quiesce shuts the intake, a Stats reader spinning) for up to two seconds
// of wall time. On two cores it shows within the first few iterations in
// nearly every run; with GOMAXPROCS=1 it does not show.
func TestLifecycleEmitRefusalLeavesCountersAlone(t *testing.T) {
	sched, err := schedulers.NewParallel("lp-refusal", 2)
	require.NoError(t, err)
	defer sched.Dispose()
	var decreased, afterDone atomic.Pointer[string]
	iterations := 0
	for start := time.Now(); time.Since(start) < 2*time.Second && decreased.Load() == nil && afterDone.Load() == nil; iterations++ {
		spins := 50 * (1 + iterations%8) // vary the timing from one iteration to the next
		d := started(t, nil, func(context.Context, testkit.Exchange) error {
			for range spins {
				runtime.Gosched()
			}
			return nil
		}, dispatch.WithScheduler(sched), dispatch.WithMaxPending(1))
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			var last dispatch.Stats
			for !stop.Load() {
				done := testkit.Closed(d.Done())
				s := d.Stats()
				if s.Received < last.Received {
					msg := fmt.Sprintf("%+v, then %+v", last, s)
					decreased.CompareAndSwap(nil, &msg)
				}
				if done && s.InFlight != 0 {
					msg := fmt.Sprintf("%+v", s)
					afterDone.CompareAndSwap(nil, &msg)
				}
				last = s
			}
		})
		for e := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					x := testkit.Exchange{ID: aggregate.NewID(orders, "e"+strconv.Itoa(e)), Seq: i}
					if d.Emit(context.Background(), x) != nil {
						return
					}
				}
			})
		}
		for d.Stats().Received < 3 {
			runtime.Gosched()
		}
		d.Quiesce()
		<-d.Done()
		stop.Store(true)
		wg.Wait()
	}
	if msg := decreased.Load(); msg != nil {
		t.Errorf("Received decreased: %s", *msg)
	}
	if msg := afterDone.Load(); msg != nil {
		t.Errorf("InFlight not 0 once Done closed: %s", *msg)
	}
}

// lpImmediateChild names the environment variable under which
// TestLifecycleImmediateLetsVirtualTimeAdvance runs its bubble, in a child
// process of the test binary.
const lpImmediateChild = "AGGFLOW_LP_IMMEDIATE_BUBBLE"

// A dispatcher on schedulers.Immediate lets a bubble's virtual time advance
// while a handler waits for it: every goroutine of the dispatcher is
// durably blocked then. Found by the lifecycle properties (a lent Immediate
// hung the bubble): the scheduler watcher that Start runs for a lent
// scheduler selects on the scheduler's Done, and Immediate's is one channel
// for the process, made outside any bubble, so the watcher is not durably
// blocked and the clock never moves (synctest.Wait never returns either).
// The bubble runs in a child process with a 5s timeout, so that the hang
// fails this test instead of the whole package.
func TestLifecycleImmediateLetsVirtualTimeAdvance(t *testing.T) {
	if os.Getenv(lpImmediateChild) != "" {
		synctest.Test(t, func(t *testing.T) {
			d := started(t, flux.FromSlice(exchanges(1, 1)), func(ctx context.Context, _ testkit.Exchange) error {
				time.Sleep(time.Millisecond) // virtual: the bubble must be idle for it to end
				return nil
			}, dispatch.WithScheduler(schedulers.Immediate()))
			<-d.Done()
			assert.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, d.Stats())
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLifecycleImmediateLetsVirtualTimeAdvance$", "-test.count=1", "-test.timeout=5s")
	cmd.Env = append(os.Environ(), lpImmediateChild+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	// The timeout's dump: keep the panic and the goroutines that are not
	// durably blocked.
	var keep []string
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "panic:"), strings.HasPrefix(l, "--- FAIL"):
			keep = append(keep, l)
		case strings.Contains(l, "synctest bubble") && !strings.Contains(l, "durable"):
			keep = append(keep, lines[i:min(i+3, len(lines))]...)
		}
	}
	t.Errorf("the bubble did not end (%v): a goroutine of the dispatcher is not durably blocked:\n%s", err, strings.Join(keep, "\n"))
}
