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
