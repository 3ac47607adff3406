package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

// An exchange that cannot be routed (its AggregateID panics) fails alone,
// also when the failure log's handler panics: the panic costs the log line
// only (it used to reach Emit's caller), the exchange is counted as failed
// and the stop reaches its end. It used to stay in flight for ever.
func TestUnroutedWithPanickingFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := dispatch.New[panickyID]("orders", orders, nil,
			func(context.Context, panickyID) error { return nil },
			dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		emit := func(x panickyID) (v any) {
			defer func() { v = recover() }()
			require.NoError(t, d.Emit(t.Context(), x))
			return nil
		}
		require.Nil(t, emit(panickyID{bad: true}), "the log handler's panic is the logger's")
		require.Nil(t, emit(panickyID{id: "a"}))
		st, err := edgeStop(t, d)
		require.NoError(t, err, "stats %+v", st)
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, st)
	})
}

// edgeEmitAsync runs Emit on its own goroutine and returns where its result
// arrives.
func edgeEmitAsync(d *dispatch.Dispatcher[testkit.Exchange], x testkit.Exchange) <-chan error {
	res := make(chan error, 1)
	go func() { res <- d.Emit(context.Background(), x) }()
	return res
}

// A producer waiting in Emit for the pending budget is released by Quiesce
// with ErrStopped, at once: it does not wait for a slow handler to free a
// unit.
func TestEmitWaitingForBudgetIsReleasedByQuiesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // a slow handler: an hour of I/O, say
			return nil
		}, dispatch.WithMaxPending(1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := edgeEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait() // the second Emit waits for the budget
		d.Quiesce()
		synctest.Wait()
		received := false
		select {
		case err := <-second:
			received = true
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked after Quiesce (state %v, %+v): the stop does not release a producer waiting for the budget", d.State(), d.Stats())
		}
		close(release)
		<-d.Done()
		if !received {
			<-second
		}
	})
}

// The same after ForceStop, with a handler that ignores its context: the
// dispatcher is STOPPED and Emit returns ErrStopped, though the handler
// still runs.
func TestEmitWaitingForBudgetIsReleasedByForceStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started[testkit.Exchange](t, nil, func(ctx context.Context, x testkit.Exchange) error {
			<-release // ignores ctx
			return nil
		}, dispatch.WithMaxPending(1))
		id := aggregate.NewID(orders, "a")
		require.NoError(t, d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: 0}))
		second := edgeEmitAsync(d, testkit.Exchange{ID: id, Seq: 1})
		synctest.Wait()
		d.ForceStop()
		synctest.Wait()
		require.Equal(t, component.StateStopped, d.State())
		received := false
		select {
		case err := <-second:
			received = true
			assert.ErrorIs(t, err, dispatch.ErrStopped)
		default:
			t.Errorf("Emit still blocked on a STOPPED dispatcher (%+v)", d.Stats())
		}
		close(release)
		<-d.Done()
		if !received {
			<-second
		}
	})
}

// A handler may feed a follow-up back with Emit on the Immediate scheduler,
// where the lane runs inline on Emit's caller: Emit holds no lock while it
// schedules, so the nested Emit neither deadlocks nor needs a force.
func TestEmitFromHandlerOnImmediate(t *testing.T) {
	var d *dispatch.Dispatcher[testkit.Exchange]
	d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, func(ctx context.Context, x testkit.Exchange) error {
		if x.Seq == 0 {
			return d.Emit(ctx, testkit.Exchange{ID: x.ID, Seq: 1})
		}
		return nil
	}, quiet, dispatch.WithScheduler(schedulers.Immediate()))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	// no cleanup waiting for Done: if the defect is there, Done never closes
	res := edgeEmitAsync(d, testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: 0})
	select {
	case err := <-res:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		d.ForceStop()
		select {
		case <-d.Done():
			t.Errorf("Emit from a handler blocked until ForceStop on the Immediate scheduler")
		case <-time.After(2 * time.Second):
			t.Fatalf("Emit from a handler on the Immediate scheduler deadlocked; ForceStop does not end it (state %v, %+v)", d.State(), d.Stats())
		}
	}
	require.NoError(t, d.StopGracefully(context.Background()))
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
}

// edgeEmitRun hammers Emit from several goroutines and stops the dispatcher
// at a random moment; it checks that Emit returned nil exactly for the
// exchanges counted, the ledger, and it polls Stats once Done closed.
func edgeEmitRun(t *testing.T, seed uint64) (afterDone dispatch.Stats, bad bool) {
	r := rand.New(rand.NewPCG(seed, 3))
	producers, ids, budget := 2+r.IntN(6), 1+r.IntN(20), 1+r.IntN(8)
	stop := r.IntN(3)
	led := newBrkLedger()
	d, err := dispatch.New[testkit.Exchange]("edge", orders, nil, func(ctx context.Context, x testkit.Exchange) error {
		led.handle(x)
		return nil
	}, quiet, dispatch.WithParallelism(1+r.IntN(8)), dispatch.WithMaxPending(budget),
		dispatch.WithDiscardHook(led.discard), dispatch.WithScheduler(newParallel(t, 1+r.IntN(3))))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	// one id per producer, so that per-id order is the producer's order
	for p := range producers {
		wg.Go(func() {
			id := aggregate.NewID(orders, fmt.Sprintf("p%d-%d", p, p%ids))
			for seq := 0; ; seq++ {
				err := d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: seq})
				if err != nil {
					if !errors.Is(err, dispatch.ErrStopped) {
						t.Errorf("Emit: %v", err)
					}
					return
				}
				accepted.Add(1)
			}
		})
	}
	for range r.IntN(2000) { // a random point of the stream for the stop
		runtime.Gosched()
	}
	switch stop {
	case 0:
		d.Quiesce()
	case 1:
		d.ForceStop()
	case 2:
		go d.ForceStop()
		_ = d.StopGracefully(context.Background())
	}
	<-d.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		if s := d.Stats(); s.InFlight != 0 || s.Received != s.Succeeded+s.Failed+s.Discarded {
			afterDone, bad = s, true
		}
		select {
		case <-done:
			s := d.Stats()
			if s.Received != accepted.Load() {
				t.Errorf("seed %d: %d Emit calls returned nil, Received %d", seed, accepted.Load(), s.Received)
			}
			if err := led.check(s, nil); err != nil {
				t.Errorf("seed %d: %v", seed, err)
			}
			return afterDone, bad
		default:
		}
	}
}

// An Emit racing a stop never shows in Stats after Done: it is counted in
// Received only once it is past the gate (InFlight is 0 after Done, and
// Received never goes down).
func TestEmitRacingStopNoInFlightAfterDone(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	seen := 0
	var example dispatch.Stats
	for i := range uint64(300) {
		if s, bad := edgeEmitRun(t, base+i); bad {
			seen++
			example = s
		}
		if t.Failed() {
			return
		}
	}
	if seen > 0 {
		t.Errorf("%d of 300 runs showed InFlight != 0 after Done, e.g. %+v", seen, example)
	}
}

// goexitOnAdmitted is an Observer whose Admitted ends its goroutine with
// runtime.Goexit at the n-th call: what a test's t.FailNow does in it.
type goexitOnAdmitted struct {
	*countingObserver
	n     int64
	calls int64 // only the intake's goroutine calls Admitted here
}

func (o *goexitOnAdmitted) Admitted(ctx context.Context, l dispatch.Labels) {
	o.calls++
	if o.calls == o.n {
		runtime.Goexit()
	}
	o.countingObserver.Admitted(ctx, l)
}

// goexitID is an exchange whose AggregateID ends its goroutine when
// asked for the id "exit".
type goexitID struct{ id aggregate.ID }

func (x goexitID) AggregateID() aggregate.ID {
	if x.id.ID == "exit" {
		runtime.Goexit()
	}
	return x.id
}

// edgeStoppable is what the cases below look at of a Dispatcher or a
// MainDispatcher.
type edgeStoppable interface {
	Done() <-chan struct{}
	ForceStop()
	Stats() dispatch.Stats
	Err() error
}

// edgeWaitDone waits for c's Done within a minute of the bubble's time; it
// reports whether Done closed.
func edgeWaitDone(t *testing.T, c interface{ Done() <-chan struct{} }, what string) bool {
	t.Helper()
	select {
	case <-c.Done():
		return true
	case <-time.After(time.Minute):
		t.Errorf("%s: Done not closed a minute after the stop", what)
		return false
	}
}

// User code the intake calls on the source's goroutine (the Observer's
// Admitted, a key function, AggregateID) that ends it with runtime.Goexit
// leaves no exchange in flight: the source's end is an error, the exchange
// ends once (Received == Succeeded + Failed + Discarded) and Done closes.
func TestIntakeGoexitOnTheSourceGoroutineEndsTheExchange(t *testing.T) {
	xs := exchanges(5, 5)
	cases := map[string]func(t *testing.T) edgeStoppable{
		"Admitted": func(t *testing.T) edgeStoppable {
			obs := &goexitOnAdmitted{countingObserver: &countingObserver{}, n: 3}
			d, err := dispatch.New("orders", orders, flux.FromSlice(xs), testkit.Perform, quiet,
				dispatch.WithObserver(obs), dispatch.WithScheduler(schedulers.Immediate()))
			require.NoError(t, err)
			require.NoError(t, d.Prepare(t.Context()))
			require.NoError(t, d.Start())
			return d
		},
		"key function": func(t *testing.T) edgeStoppable {
			d, err := dispatch.NewKeyed("orders", orders, flux.FromSlice(xs), func(x testkit.Exchange) int {
				if x.ID.ID == xs[2].ID.ID {
					runtime.Goexit()
				}
				return 0
			}, testkit.Perform, quiet)
			require.NoError(t, err)
			require.NoError(t, d.Prepare(t.Context()))
			require.NoError(t, d.Start())
			return d
		},
		"AggregateID on a MainDispatcher": func(t *testing.T) edgeStoppable {
			sup, err := aggregate.NewSchedulerSupplier("main", aggregate.WithParallelism(2))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, sup.StopGracefully(context.Background())) })
			ys := []goexitID{{aggregate.NewID(orders, "a")}, {aggregate.NewID(orders, "exit")}, {aggregate.NewID(orders, "b")}}
			m, err := dispatch.NewMain("main", []aggregate.NamedAggregate{orders}, flux.FromSlice(ys),
				func(context.Context, goexitID) error { return nil }, sup, quietOf[goexitID]())
			require.NoError(t, err)
			require.NoError(t, m.Prepare(t.Context()))
			require.NoError(t, m.Start())
			return m
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := build(t)
				if !edgeWaitDone(t, d, "after the source's goroutine ended") {
					d.ForceStop()
					if !edgeWaitDone(t, d, "after ForceStop") {
						s := d.Stats()
						t.Fatalf("the exchange whose intake ended with Goexit stays in flight for ever: %+v", s)
					}
				}
				s := d.Stats()
				assert.Zero(t, s.InFlight, "%+v", s)
				assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded, "%+v", s)
				assert.ErrorIs(t, d.Err(), schedulers.ErrGoexit)
			})
		})
	}
}

// The same on Emit's caller: the Emit that its Observer's Admitted ended
// with runtime.Goexit leaves nothing in flight, so the dispatcher still
// stops gracefully and reaches Done.
func TestEmitGoexitInAdmittedLeavesTheDispatcherStoppable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &goexitOnAdmitted{countingObserver: &countingObserver{}, n: 2}
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, testkit.Perform, quiet,
			dispatch.WithObserver(obs), dispatch.WithMaxPending(4))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		xs := exchanges(3, 3)
		emitted := make(chan struct{})
		go func() {
			defer close(emitted)
			for _, x := range xs {
				assert.NoError(t, d.Emit(context.Background(), x))
			}
		}()
		<-emitted // the second Emit ended its goroutine
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = d.StopGracefully(ctx)
		if err != nil {
			t.Errorf("StopGracefully after an Emit ended with Goexit: %v (%+v)", err, d.Stats())
			d.ForceStop()
			if !edgeWaitDone(t, d, "after ForceStop") {
				t.Fatalf("an Emit ended with Goexit holds the dispatcher for ever: %+v", d.Stats())
			}
		}
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, s, "the Emit cut short was not admitted")
		pending, _ := d.Budget()
		assert.Zero(t, pending, "the Emit cut short gave its budget unit back")
	})
}

// reasonLog records the discard hook's reasons beside an edgeLedger.
type reasonLog struct {
	mu      sync.Mutex
	reasons []error
}

func (r *reasonLog) hook(l *edgeLedger) func(testkit.Exchange, error) {
	return func(x testkit.Exchange, reason error) {
		r.mu.Lock()
		r.reasons = append(r.reasons, reason)
		r.mu.Unlock()
		l.discard(x, reason)
	}
}

// heldFirst is a handler that records every exchange in l and holds the
// first one (Seq 0) until release closes.
func heldFirst(l *edgeLedger, release <-chan struct{}) dispatch.Handler[testkit.Exchange] {
	return func(ctx context.Context, x testkit.Exchange) error {
		l.handle(x)
		if x.Seq == 0 {
			<-release
		}
		return nil
	}
}

// A graceful stop that comes while the source holds an item it took from
// the user's channel (here waiting for room in the pending budget) hands
// that item on: it is handled, not discarded; what is still in the channel
// stays there.
func TestGracefulStopHandsOnTheItemTakenFromTheChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(3, 1)
		in := make(chan testkit.Exchange, len(xs))
		for _, x := range xs {
			in <- x
		}
		ledger, release := newBrkLedger(), make(chan struct{})
		d := started(t, flux.FromChannel(in), heldFirst(ledger, release),
			dispatch.WithMaxPending(1), dispatch.WithDiscardHook(ledger.discard))
		synctest.Wait() // 0 in its handler, 1 taken and waiting for the budget, 2 in the channel
		require.Len(t, in, 1)

		stopped := make(chan error, 1)
		go func() { stopped <- d.StopGracefully(t.Context()) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-stopped)

		require.NoError(t, ledger.check(d.Stats(), nil))
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
		require.Equal(t, []int{0, 1}, ledger.handled[xs[0].ID.ID], "the item taken is handed on")
		require.Len(t, in, 1, "the item left in the channel is not taken")
	})
}

// What an operator of a flux source drops because the intake closed (the
// queue of a PublishOn between the channel and the dispatcher) is counted
// and discarded with ErrStopped, given to the discard hook, as an exchange
// a source emits after the intake closed is.
func TestFluxSourceDropsAfterTheIntakeClosedAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(5, 1)
		in := make(chan testkit.Exchange, len(xs))
		for _, x := range xs {
			in <- x
		}
		close(in)
		pub, err := schedulers.NewParallel("publish", 1)
		require.NoError(t, err)
		defer func() { pub.Dispose(); <-pub.Done() }()
		ledger, release, reasons := newBrkLedger(), make(chan struct{}), &reasonLog{}
		d := started(t, flux.FromChannel(in).PublishOn(pub, 4), heldFirst(ledger, release),
			dispatch.WithMaxPending(1), dispatch.WithDiscardHook(reasons.hook(ledger)))
		synctest.Wait() // 0 in its handler, 1 waiting for the budget, the rest in PublishOn's queue

		stopped := make(chan error, 1)
		go func() { stopped <- d.StopGracefully(t.Context()) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-stopped)

		st := d.Stats()
		require.NoError(t, ledger.check(st, nil))
		require.Equal(t, int64(len(xs)), st.Received, "every item the source took is counted: %+v", st)
		ledger.mu.Lock()
		got := len(ledger.handled[xs[0].ID.ID]) + len(ledger.discarded[xs[0].ID.ID])
		ledger.mu.Unlock()
		require.Equal(t, len(xs), got, "each handled or discarded")
		require.NotEmpty(t, reasons.reasons)
		for _, r := range reasons.reasons {
			require.True(t, errors.Is(r, dispatch.ErrStopped), "reason %v", r)
		}
	})
}

// A graceful stop never discards an item taken from a user's channel,
// whatever the interleaving of the producer still sending, the source, the
// budget and the stop: every item the producer sent is handled, in order
// per id, or still in the channel; nothing is discarded.
func TestGracefulStopNeverDiscardsWhatTheChannelGave(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 6).Draw(rt, "ids")
		budget := rapid.IntRange(1, 8).Draw(rt, "budget")
		capacity := rapid.IntRange(0, 4).Draw(rt, "capacity")
		stopAfter := rapid.IntRange(0, 40).Draw(rt, "stopAfter")
		yields := rapid.IntRange(0, 3).Draw(rt, "yields")

		in := make(chan testkit.Exchange, capacity)
		var (
			mu        sync.Mutex
			handled   = map[string][]int{}
			discarded = map[string][]int{}
			nth       int
		)
		trigger := make(chan struct{})
		d, err := dispatch.New("orders", orders, flux.FromChannel(in), func(_ context.Context, x testkit.Exchange) error {
			for range yields {
				runtime.Gosched()
			}
			mu.Lock()
			handled[x.ID.ID] = append(handled[x.ID.ID], x.Seq)
			nth++
			if nth == stopAfter {
				close(trigger)
			}
			mu.Unlock()
			return nil
		}, quiet, dispatch.WithMaxPending(budget), dispatch.WithParallelism(4),
			dispatch.WithDiscardHook(func(x testkit.Exchange, _ error) {
				mu.Lock()
				discarded[x.ID.ID] = append(discarded[x.ID.ID], x.Seq)
				mu.Unlock()
			}))
		if err != nil {
			rt.Fatal(err)
		}
		if err := d.Prepare(context.Background()); err != nil {
			rt.Fatal(err)
		}
		if err := d.Start(); err != nil {
			rt.Fatal(err)
		}

		stopProducing := make(chan struct{})
		sent := make(chan []testkit.Exchange, 1)
		go func() { // sends until told to stop, still while the dispatcher stops
			var xs []testkit.Exchange
			defer func() { sent <- xs }()
			for i := 0; ; i++ {
				x := testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%ids)), Seq: i / ids}
				select {
				case in <- x:
					xs = append(xs, x)
				case <-stopProducing:
					return
				}
			}
		}()
		if stopAfter > 0 {
			<-trigger
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.StopGracefully(ctx); err != nil {
			rt.Fatal(err)
		}
		close(stopProducing)
		xs := <-sent
		left := map[string][]int{}
		for len(in) > 0 {
			x := <-in
			left[x.ID.ID] = append(left[x.ID.ID], x.Seq)
		}
		if s := d.Stats(); s.Discarded != 0 || s.Failed != 0 || s.InFlight != 0 || s.Received != s.Succeeded+s.Discarded {
			rt.Fatalf("stats %+v: a graceful stop discarded an item taken from the channel", s)
		}
		want := map[string][]int{}
		for _, x := range xs {
			want[x.ID.ID] = append(want[x.ID.ID], x.Seq)
		}
		for id, seqs := range want {
			got := append(append(append([]int(nil), handled[id]...), discarded[id]...), left[id]...)
			if fmt.Sprint(got) != fmt.Sprint(seqs) {
				rt.Fatalf("id %s: handled %v, discarded %v, left in the channel %v; sent %v", id, handled[id], discarded[id], left[id], seqs)
			}
		}
	})
}

// A ForceStop from a handler discards what is queued, each discarded
// exchange's hooks on a goroutine of their own: per id they still see the
// exchanges in order, the outcome hook before the discard hook, each once,
// and every exchange is handled or discarded exactly once.
func TestForceStopFromHandlerDiscardsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ids, per = 5, 40
		var mu sync.Mutex
		seen := map[string]string{} // per id: "o" (outcome hook) and "d" (discard hook) as called
		order := map[string][]int{}
		ledger := newBrkLedger()
		var d *dispatch.Dispatcher[testkit.Exchange]
		gate := make(chan struct{})
		var err error
		d, err = dispatch.New[testkit.Exchange]("orders", orders, nil,
			func(ctx context.Context, x testkit.Exchange) error {
				<-gate
				ledger.handle(x)
				if x.ID.ID == itoa(2) && x.Seq == 3 {
					d.ForceStop()
				}
				return nil
			}, quietOf[testkit.Exchange](), dispatch.WithParallelism(3),
			dispatch.WithScheduler(newParallel(t, 2)),
			dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
				if r.Outcome == dispatch.OutcomeDiscarded {
					mu.Lock()
					seen[r.Exchange.ID.ID] += "o"
					order[r.Exchange.ID.ID] = append(order[r.Exchange.ID.ID], r.Exchange.Seq)
					mu.Unlock()
				}
			}),
			dispatch.WithDiscardHook(func(x testkit.Exchange, err error) {
				mu.Lock()
				seen[x.ID.ID] += "d"
				mu.Unlock()
				ledger.discard(x, err)
			}))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		for seq := range per {
			for id := range ids {
				require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, itoa(id)), Seq: seq}))
			}
		}
		close(gate)
		<-d.Done()
		require.NoError(t, ledger.check(d.Stats(), nil))
		require.Positive(t, d.Stats().Discarded, "the force discarded what was queued")
		mu.Lock()
		defer mu.Unlock()
		for id, seqs := range order {
			for i := 1; i < len(seqs); i++ {
				require.Less(t, seqs[i-1], seqs[i], "id %s discarded out of order: %v", id, seqs)
			}
		}
		for id, calls := range seen {
			require.Equal(t, strings.Repeat("od", len(calls)/2), calls, "id %s: the outcome hook, then the discard hook, per exchange", id)
		}
	})
}

// A graceful stop that times out once every exchange ended, while the
// source still runs, finds the dispatcher STOPPING (a graceful drain waits
// for the source, which may hold an item it took): "not stopped", naming
// the source. Once forced it is STOPPED (the logical end) but not done (the
// physical end): a timed-out stop's error says so, in the state's own
// terms, rather than "not stopped" beside a State() of STOPPED.
func TestTimedOutStopNamesTheState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		src := flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
			for _, x := range exchanges(3, 1) {
				if err := sink.Next(x); err != nil {
					return err
				}
			}
			<-release // ignores ctx
			return nil
		})
		d := started(t, src, testkit.Perform)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopping, d.State(), "the drain waits for the source")
		assert.ErrorContains(t, err, `dispatcher "orders" not stopped`)
		assert.ErrorContains(t, err, "source is still running")

		d.ForceStop()
		forced, cancelForced := context.WithTimeout(t.Context(), time.Second)
		defer cancelForced()
		err = d.StopGracefully(forced)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopped, d.State())
		assert.NotContains(t, err.Error(), "not stopped", "the state is STOPPED")
		assert.ErrorContains(t, err, `dispatcher "orders" stopped, not done`)
		released = true
		close(release)
		<-d.Done()
	})
}

// Timed out while handlers still run, the dispatcher is STOPPING: "not
// stopped" is then what it is.
func TestTimedOutStopNamesTheStateWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := started(t, flux.Just(exchanges(1, 1)...), func(context.Context, testkit.Exchange) error {
			<-release
			return nil
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := d.StopGracefully(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, component.StateStopping, d.State())
		assert.ErrorContains(t, err, `dispatcher "orders" not stopped`)
		close(release)
		require.NoError(t, d.StopGracefully(t.Context()))
	})
}

// A graceful stop that times out under stuck handlers names their aggregate
// ids, a few of them with the count of the rest, beside their groups; Run's
// error keeps wrapping ErrShutdownTimeout. In both orderings: by group, and
// by aggregate id (WithKeyOrdering).
func TestGracefulTimeoutNamesTheStuckAggregateIDs(t *testing.T) {
	for name, ordering := range map[string][]dispatch.Option[testkit.Exchange]{
		"groups": nil,
		"keys":   {dispatch.WithKeyOrdering()},
	} {
		t.Run(name, func(t *testing.T) { stuckIDsNamed(t, ordering) })
	}
}

func stuckIDsNamed(t *testing.T, ordering []dispatch.Option[testkit.Exchange]) {
	synctest.Test(t, func(t *testing.T) {
		const groups, stuck = 64, 5
		var ids []string
		seen := map[int]bool{}
		for i := 0; len(ids) < stuck; i++ { // ids in distinct groups, so that each runs
			id := "agg-" + strconv.Itoa(i)
			if g := aggregate.NewID(orders, id).Mod(groups); !seen[g] {
				seen[g] = true
				ids = append(ids, id)
			}
		}
		sched, err := schedulers.NewParallel("stuck", stuck)
		require.NoError(t, err)
		defer func() { sched.Dispose(); <-sched.Done() }()
		running := make(chan struct{}, stuck)
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, func(ctx context.Context, _ testkit.Exchange) error {
			running <- struct{}{}
			<-ctx.Done() // until the force
			return ctx.Err()
		}, append([]dispatch.Option[testkit.Exchange]{quiet, dispatch.WithParallelism(groups),
			dispatch.WithScheduler(sched), dispatch.WithStopTimeout(time.Second)}, ordering...)...)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		synctest.Wait()
		for _, id := range ids {
			require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, id)}))
		}
		for range ids {
			<-running
		}
		cancel()
		err = <-ran
		require.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		named := 0
		for _, id := range ids {
			if strings.Contains(err.Error(), strconv.Quote(id)) {
				named++
			}
		}
		require.Equal(t, 3, named, "a few ids named: %v", err)
		require.ErrorContains(t, err, "and 2 more")
	})
}

// In a MainDispatcher, the end of one named aggregate's scheduler (its
// owner disposes it by force, or gracefully) retires that aggregate only:
// its running handler's ctx is cancelled, what its lanes held and whatever
// of it arrives later is discarded with ErrRejected, counted and given to
// the hooks, while the other aggregate goes on from the same source, which
// is not cut; Err reports the retirement once Done closed.
func TestMainSchedulerEndRetiresItsAggregateOnly(t *testing.T) {
	for name, c := range map[string]struct {
		end     func(s schedulers.Scheduler, release chan struct{})
		handled []int // the invoices handled: those of the running batch under a graceful disposal
	}{
		"Dispose": {func(s schedulers.Scheduler, _ chan struct{}) { s.Dispose() }, []int{0}},
		"DisposeGracefully": {func(s schedulers.Scheduler, release chan struct{}) {
			go func() { _ = s.DisposeGracefully(context.Background()) }()
			require.Eventually(t, func() bool { return s.Schedule(func(context.Context) {}) != nil }, 10*time.Second, time.Millisecond)
			close(release) // the running batch goes on; the lane's next turn is refused
		}, []int{0, 1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			sup, _ := countingSupplier(t)
			in := make(chan testkit.Exchange)
			ledger := newBrkLedger()
			var (
				mu      sync.Mutex
				reasons []error
			)
			blocked, release := make(chan struct{}), make(chan struct{})
			h := func(ctx context.Context, x testkit.Exchange) error {
				ledger.handle(x)
				if x.ID.Named == invoices && x.Seq == 0 {
					close(blocked)
					select { // held until its scheduler ends
					case <-ctx.Done():
						return ctx.Err()
					case <-release:
						return nil
					}
				}
				return nil
			}
			m := newMain(t, flux.FromChannel(in), h, sup, dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
				mu.Lock()
				reasons = append(reasons, reason)
				mu.Unlock()
				ledger.discard(x, reason)
			}))
			require.NoError(t, m.Prepare(t.Context()))
			require.NoError(t, m.Start())
			forceOnCleanup(t, m)

			send := func(x testkit.Exchange) {
				t.Helper()
				select {
				case in <- x:
				case <-m.Done():
					t.Fatalf("the source was cut: %v not taken; Err: %v", x, m.Err())
				}
			}
			inv := aggregate.NewID(invoices, "i")
			ord := aggregate.NewID(orders, "o")
			seq := 0
			for ; seq < 3; seq++ { // invoice 0 holds its lane, 1 and 2 wait behind it
				send(testkit.Exchange{ID: inv, Seq: seq})
				send(testkit.Exchange{ID: ord, Seq: seq})
			}
			<-blocked
			s, err := sup.GetOrInitialize(invoices)
			require.NoError(t, err)
			c.end(s, release)
			<-s.Done()
			for ; seq < 50; seq++ {
				send(testkit.Exchange{ID: ord, Seq: seq})
				send(testkit.Exchange{ID: inv, Seq: seq}) // retired: discarded
			}
			require.Equal(t, component.StateRunning, m.State())
			close(in)
			<-m.Done()

			require.ErrorIs(t, m.Err(), schedulers.ErrRejected)
			require.ErrorContains(t, m.Err(), invoices.String())
			st := m.Stats()
			require.NoError(t, ledger.check(st, nil))
			require.Equal(t, int64(100), st.Received)
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			require.Len(t, ledger.handled[ord.ID], 50, "every order handled")
			require.Equal(t, c.handled, ledger.handled[inv.ID], "no invoice handled after its scheduler ended")
			require.Len(t, ledger.discarded[inv.ID], 50-len(c.handled))
			require.Equal(t, int64(50-len(c.handled)), st.Discarded)
			for _, r := range reasons {
				require.True(t, errors.Is(r, schedulers.ErrRejected), "reason %v", r)
			}
		})
	}
}

// hang is how long, in virtual time, a test waits for something that only a
// hang would keep from happening: the bubble's clock gets there only once
// every goroutine in it is blocked.
const hang = time.Hour

// emitAll emits xs in order with ctx, stopping at the first error.
func emitAll(ctx context.Context, d *dispatch.Dispatcher[testkit.Exchange], xs []testkit.Exchange) error {
	for _, x := range xs {
		if err := d.Emit(ctx, x); err != nil {
			return err
		}
	}
	return nil
}

// producerExchanges returns n exchanges of producer p over ids ids of its
// own, so that the per-id order is the order p emits them in.
func producerExchanges(p, n, ids int) []testkit.Exchange {
	xs := make([]testkit.Exchange, n)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "p"+strconv.Itoa(p)+"-"+strconv.Itoa(i%ids)), Seq: i / ids}
	}
	return xs
}

// Several goroutines Emit at once: nothing is lost, each id keeps the order
// its producer emitted it in, each group is serial (and -race sees the
// hand-off from every producer to the lanes).
func TestEmitFromSeveralGoroutines(t *testing.T) {
	const producers, n, p = 4, 500, 16
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) }, testkit.Perform)
	d := started(t, nil, rec.Handle, dispatch.WithParallelism(p),
		dispatch.WithScheduler(newParallel(t, 4)))
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() { assert.NoError(t, emitAll(t.Context(), d, producerExchanges(i, n, 10))) })
	}
	wg.Wait()
	require.NoError(t, d.StopGracefully(t.Context()))
	calls := rec.Calls()
	assert.NoError(t, testkit.PerKeyFIFO(calls))
	assert.NoError(t, testkit.GroupSerial(calls))
	assert.NoError(t, testkit.NoLoss(producers*n, d.Stats(), calls))
	assert.Equal(t, dispatch.Stats{Received: producers * n, Succeeded: producers * n}, d.Stats())
}

// The same with a pending budget smaller than the number of producers, so
// that several of them wait for room at once: every Emit must get through.
// A waiting Emit counts itself in the budget, so with two waiters and a
// budget of 1 the room they wait for never comes (flow.go, budget.acquire).
func TestEmitSeveralWaitersGetThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const producers, n = 4, 50
		release := make(chan struct{})
		var first atomic.Bool
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(8) },
			func(ctx context.Context, x testkit.Exchange) error {
				if first.CompareAndSwap(false, true) {
					<-release // hold the budget until every producer waits
				}
				return nil
			})
		d := started(t, nil, rec.Handle, dispatch.WithParallelism(8),
			dispatch.WithMaxPending(1), dispatch.WithScheduler(newParallel(t, 2)))
		ctx, cancel := context.WithTimeout(t.Context(), hang)
		defer cancel()
		var wg sync.WaitGroup
		for i := range producers {
			wg.Go(func() { assert.NoError(t, emitAll(ctx, d, producerExchanges(i, n, 3)), "producer %d", i) })
		}
		synctest.Wait() // one exchange handled and held, every producer waiting for room
		close(release)
		wg.Wait()
		require.NoError(t, d.StopGracefully(ctx))
		calls := rec.Calls()
		assert.NoError(t, testkit.PerKeyFIFO(calls))
		assert.Equal(t, dispatch.Stats{Received: producers * n, Succeeded: producers * n}, d.Stats())
	})
}

// With the budget used up by a blocked handler, Emit waits; when its ctx
// ends it returns ctx's cause and the exchange is not counted.
func TestEmitBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var handled atomic.Int64
		d := started(t, nil, func(context.Context, testkit.Exchange) error {
			if handled.Add(1) == 1 {
				<-release
			}
			return nil
		}, dispatch.WithMaxPending(1))
		xs := exchanges(3, 3)
		require.NoError(t, d.Emit(t.Context(), xs[0]))
		synctest.Wait() // its handler holds the only unit of the budget

		waitCause := errors.New("the producer gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- d.Emit(ctx, xs[1]) }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Emit returned %v while the budget is used up", err)
		default:
		}
		assert.Equal(t, dispatch.Stats{Received: 1, InFlight: 1}, d.Stats(), "a waiting exchange is not counted")
		cancel(waitCause)
		assert.ErrorIs(t, <-errc, waitCause, "Emit returns ctx's cause")
		assert.Equal(t, dispatch.Stats{Received: 1, InFlight: 1}, d.Stats(), "the exchange given up is not counted")

		// The unit the cancelled Emit held is given back: once the handler
		// returns, the next Emit gets through without waiting.
		close(release)
		synctest.Wait()
		start := time.Now()
		require.NoError(t, d.Emit(t.Context(), xs[2]))
		assert.Zero(t, time.Since(start))
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 2}, d.Stats())
	})
}

// Emit before Start and after a stop returns ErrStopped and counts nothing;
// Emit on a dispatcher with a source is refused.
func TestEmitOutsideRunning(t *testing.T) {
	x := exchanges(1, 1)[0]
	d, err := dispatch.New("orders", orders, nil, testkit.Perform, quiet)
	require.NoError(t, err)
	assert.ErrorIs(t, d.Emit(t.Context(), x), dispatch.ErrStopped, "before Prepare")
	require.NoError(t, d.Prepare(t.Context()))
	assert.ErrorIs(t, d.Emit(t.Context(), x), dispatch.ErrStopped, "before Start")
	require.NoError(t, d.Start())
	require.NoError(t, d.Emit(t.Context(), x))
	require.NoError(t, d.StopGracefully(t.Context()))
	err = d.Emit(t.Context(), x)
	assert.ErrorIs(t, err, dispatch.ErrStopped, "after a graceful stop")
	assert.ErrorContains(t, err, `dispatcher "orders"`)
	assert.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, d.Stats(), "a refused Emit is not counted")

	f := started(t, nil, testkit.Perform)
	f.ForceStop()
	<-f.Done()
	assert.ErrorIs(t, f.Emit(t.Context(), x), dispatch.ErrStopped, "after a force")
	assert.Equal(t, dispatch.Stats{}, f.Stats())

	s := started(t, flux.FromSlice(exchanges(3, 1)), testkit.Perform)
	assert.ErrorIs(t, s.Emit(t.Context(), x), dispatch.ErrIllegalState, "a dispatcher with a source")
	<-s.Done()
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 3}, s.Stats())
}

// An exchange Emit cannot route is counted and fails (or, in a
// MainDispatcher, is discarded) and Emit returns nil.
func TestEmitUnroutable(t *testing.T) {
	obs := &countingObserver{}
	d := startedKeyed(t, nil, func(i int) int { return i }, func(context.Context, int) error { return nil },
		dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	for _, i := range []int{0, -1, 3, 4} {
		require.NoError(t, d.Emit(t.Context(), i))
	}
	require.NoError(t, d.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 4, Succeeded: 2, Failed: 2}, d.Stats())
	assert.True(t, every(obs.errs, dispatch.ErrInvalidGroupKey))

	// A key function that panics fails its exchange alone; Emit returns nil
	// and the next exchange is admitted.
	obs = &countingObserver{}
	d = startedKeyed(t, nil, func(i int) int {
		if i == 1 {
			panic("bad key")
		}
		return i
	}, func(context.Context, int) error { return nil }, dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, d.Emit(t.Context(), i))
	}
	require.NoError(t, d.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 2, Failed: 1}, d.Stats())
	require.Len(t, obs.errs, 1)
	assert.ErrorIs(t, obs.errs[0], dispatch.ErrInvalidGroupKey)
	var pe *dispatch.PanicError
	assert.ErrorAs(t, obs.errs[0], &pe)
	assert.ErrorContains(t, obs.errs[0], "key function panicked")

	sup, _ := countingSupplier(t)
	var unknown atomic.Int64
	m := newMain(t, nil, testkit.Perform, sup, dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
		assert.ErrorIs(t, reason, dispatch.ErrUnknownAggregate)
		unknown.Add(1)
	}))
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	for _, x := range mixed(30, 3, orders, invoices, payments) {
		require.NoError(t, m.Emit(t.Context(), x))
	}
	require.NoError(t, m.StopGracefully(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 30, Succeeded: 20, Discarded: 10}, m.Stats())
	assert.EqualValues(t, 10, unknown.Load())
}

// A stop that comes while Emit routes an exchange it cannot route must still
// let the dispatcher end: the failed exchange is the last one in flight.
// Here the key function (user code, called by Emit) is held while Quiesce
// shuts the intake.
func TestEmitUnroutableRacingQuiesceEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		d := startedKeyed(t, nil, func(i int) int {
			if i < 0 {
				close(entered)
				<-release
			}
			return i
		}, func(context.Context, int) error { return nil }, dispatch.WithParallelism(4))
		errc := make(chan error, 1)
		go func() { errc <- d.Emit(t.Context(), -1) }()
		<-entered
		d.Quiesce() // the intake shuts while the exchange is received, not yet failed
		close(release)
		require.NoError(t, <-errc)
		select {
		case <-d.Done():
		case <-time.After(hang):
			t.Errorf("not done an hour after the last exchange failed: state %v, %+v", d.State(), d.Stats())
		}
		assert.Equal(t, component.StateStopped, d.State())
		assert.Equal(t, dispatch.Stats{Received: 1, Failed: 1}, d.Stats())
	})
}

// A push-mode dispatcher has no source: a graceful stop whose ctx is over
// must not blame one. (Its ctx ended before the intake goroutine saw the
// drain, so the stop may well report ctx's error; the description of what
// is left must be true.)
func TestEmitStopTimeoutDoesNotBlameASource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := started(t, nil, testkit.Perform)
		require.NoError(t, d.Emit(t.Context(), exchanges(1, 1)[0]))
		synctest.Wait() // handled: nothing in flight
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := d.StopGracefully(ctx); err != nil {
			assert.ErrorIs(t, err, context.Canceled)
			assert.NotContains(t, err.Error(), "source", "a dispatcher fed by Emit has no source")
		}
		<-d.Done()
	})
}
