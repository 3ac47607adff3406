package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

var orders = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}

// exchanges returns n exchanges over ids aggregate ids, round robin, with
// per-id sequence numbers.
func exchanges(n, ids int) []testkit.Exchange {
	xs := make([]testkit.Exchange, n)
	seq := make([]int, ids)
	for i := range xs {
		k := i % ids
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, "id-"+itoa(k)), Seq: seq[k]}
		seq[k]++
	}
	return xs
}

func itoa(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) }

// newParallel returns a scheduler disposed at the end of the test.
func newParallel(t *testing.T, n int) schedulers.Scheduler {
	t.Helper()
	s, err := schedulers.NewParallel("test", n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.DisposeGracefully(context.Background())) })
	return s
}

func TestDispatcherHandlesEverything(t *testing.T) {
	const p = 8
	xs := exchanges(1000, 50)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) }, testkit.Perform)
	d, err := dispatch.New("orders", orders, flux.FromSlice(xs), rec.Handle,
		dispatch.WithParallelism(p), dispatch.WithScheduler(newParallel(t, 4)), quiet)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	<-d.Done()
	require.NoError(t, d.Err())
	assert.Equal(t, component.StateStopped, d.State())
	calls := rec.Calls()
	assert.NoError(t, testkit.PerKeyFIFO(calls))
	assert.NoError(t, testkit.GroupSerial(calls))
	assert.NoError(t, testkit.NoLoss(int64(len(xs)), d.Stats(), calls))
	assert.Equal(t, dispatch.Stats{Received: 1000, Succeeded: 1000}, d.Stats())
}

func TestNewValidates(t *testing.T) {
	type X = testkit.Exchange
	src := flux.Empty[X]()
	cases := []struct {
		name   string
		build  func() error
		target error
		names  string // what the error says, naming the argument at fault
	}{
		{"empty name", func() error { _, err := dispatch.New("", orders, src, testkit.Perform); return err }, dispatch.ErrInvalidArgument, "name is empty"},
		{"nil handler", func() error { _, err := dispatch.New[X]("d", orders, src, nil); return err }, dispatch.ErrInvalidArgument, "handler is nil"},
		{"nil named", func() error { _, err := dispatch.New("d", nil, src, testkit.Perform); return err }, dispatch.ErrInvalidArgument, "named aggregate is nil"},
		{"empty aggregate name", func() error {
			_, err := dispatch.New("d", aggregate.MaterializedNamedAggregate{Context: "sales"}, src, testkit.Perform)
			return err
		}, dispatch.ErrInvalidArgument, `named aggregate "sales"/"" has an empty`},
		{"empty context name", func() error {
			_, err := dispatch.NewMain("d", []aggregate.NamedAggregate{orders, aggregate.MaterializedNamedAggregate{Aggregate: "Order"}}, src, testkit.Perform, &fakeSupplier{log: &callLog{}})
			return err
		}, dispatch.ErrInvalidArgument, `named aggregate ""/"Order" has an empty`},
		{"nil supplier", func() error {
			_, err := dispatch.NewMain("d", []aggregate.NamedAggregate{orders}, src, testkit.Perform, nil)
			return err
		}, dispatch.ErrInvalidArgument, "supplier is nil"},
		{"parallelism 0", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithParallelism(0))
			return err
		}, dispatch.ErrInvalidParallelism, ""},
		{"max pending 0", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithMaxPending(0))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"stop timeout 0", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithStopTimeout(0))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"nil observer", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithObserver(nil))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"nil discard hook", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithDiscardHook[X](nil))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"nil logger", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithLogger(nil))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"unknown error policy", func() error {
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithErrorPolicy(dispatch.ErrorPolicy(7)))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"scheduler and supplier", func() error {
			sup := &fakeSupplier{log: &callLog{}}
			_, err := dispatch.New("d", orders, src, testkit.Perform, dispatch.WithScheduler(schedulers.Immediate()), dispatch.WithSchedulerSupplier(sup))
			return err
		}, dispatch.ErrInvalidOption, ""},
		{"nil key function", func() error {
			_, err := dispatch.NewKeyed[int]("d", orders, flux.Just(1), nil, func(context.Context, int) error { return nil })
			return err
		}, dispatch.ErrInvalidArgument, ""},
	}
	for _, c := range cases {
		err := c.build()
		assert.ErrorIs(t, err, c.target, c.name)
		if c.names != "" {
			assert.ErrorContains(t, err, c.names, c.name)
		}
	}
	// A discard hook or key function of another exchange type, and an
	// exchange type without an aggregate id given to New, no longer compile.
	_, err := dispatch.NewKeyed("d", orders, flux.Just(1), func(i int) int { return i }, func(context.Context, int) error { return nil })
	assert.NoError(t, err, "any type with a key function")
}

func TestFailuresAreOutcomesUnderContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		xs := exchanges(30, 5)
		for i := range xs {
			xs[i].Do = []testkit.Behaviour{testkit.Instant, testkit.Fail, testkit.Panic}[i%3]
		}
		obs := &countingObserver{}
		d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithObserver(obs))
		<-d.Done()
		require.NoError(t, d.Err(), "failures do not stop the dispatcher")
		assert.Equal(t, dispatch.Stats{Received: 30, Succeeded: 10, Failed: 20}, d.Stats())
		assert.Equal(t, int64(10), obs.finished[dispatch.OutcomeError].Load())
		assert.Equal(t, int64(10), obs.finished[dispatch.OutcomePanic].Load())
		assert.Equal(t, int64(30), obs.admitted.Load())
		assert.Equal(t, int64(30), obs.started.Load())
		assert.True(t, every(obs.errs, testkit.ErrInjected))
		var panics int
		for _, err := range obs.errs {
			var pe *dispatch.PanicError
			if errors.As(err, &pe) {
				panics++
				assert.NotEmpty(t, pe.Stack)
			}
		}
		assert.Equal(t, 10, panics)
	})
}

func TestStopOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{}
		d := started(t, src.flux(-1, func(i int) testkit.Exchange {
			x := testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%7)), Seq: i / 7, Do: testkit.Delay, Delay: time.Millisecond}
			if i == 50 {
				x.Do = testkit.Fail
			}
			return x
		}), testkit.Perform, dispatch.WithErrorPolicy(dispatch.StopOnError), dispatch.WithParallelism(7))
		<-d.Done() // the failure stopped an endless source
		require.ErrorIs(t, d.Err(), testkit.ErrInjected)
		assert.ErrorIs(t, d.StopGracefully(t.Context()), testkit.ErrInjected, "the stop reports it too")
		s := d.Stats()
		assert.Equal(t, src.pulled.Load(), s.Received)
		assert.Equal(t, int64(1), s.Failed)
		assert.LessOrEqual(t, s.Discarded, int64(1), "at most the exchange the source had in hand")
		assert.Equal(t, s.Received-1-s.Discarded, s.Succeeded, "what was admitted drained")
	})
}

func TestInvalidGroupKeyFailsOneExchange(t *testing.T) {
	const p = 4
	obs := &countingObserver{}
	d := startedKeyed(t, flux.Range(-2, 10), func(i int) int {
		if i == 5 {
			panic("bad key")
		}
		return i // -2, -1, 4, 6, 7 are outside [0, 4)
	}, func(context.Context, int) error { return nil },
		dispatch.WithParallelism(p), dispatch.WithObserver(obs))
	<-d.Done()
	require.NoError(t, d.Err())
	assert.Equal(t, dispatch.Stats{Received: 10, Succeeded: 4, Failed: 6}, d.Stats())
	assert.Equal(t, int64(4), obs.admitted.Load())
	assert.Equal(t, int64(6), obs.finished[dispatch.OutcomeError].Load())
	assert.True(t, every(obs.errs, dispatch.ErrInvalidGroupKey))
}

func TestSourceErrorDrainsThenReports(t *testing.T) {
	boom := errors.New("boom")
	xs := exchanges(20, 4)
	src := flux.Create(func(_ context.Context, sink flux.Sink[testkit.Exchange]) error {
		for _, x := range xs {
			if err := sink.Next(x); err != nil {
				return err
			}
		}
		return boom
	})
	d := started(t, src, testkit.Perform)
	<-d.Done()
	require.ErrorIs(t, d.Err(), boom)
	assert.ErrorContains(t, d.Err(), `dispatch: dispatcher "orders": source failed: boom`)
	assert.Equal(t, "orders", d.Name())
	assert.Equal(t, dispatch.Stats{Received: 20, Succeeded: 20}, d.Stats(), "admitted exchanges were handled")
}

// With every handler blocked, what was pulled from the source and not
// finished stays within the pending budget + 1 (the exchange the source's
// goroutine holds while it waits for room). The bound was parallelism x
// group buffer + 1 before the shared budget replaced the group buffers.
func TestBoundedMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p, budget = 16, 64
		src := &countingSource{}
		d := startedKeyed(t, src.flux(-1, func(i int) testkit.Exchange {
			return testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%p)), Seq: i, Do: testkit.Block}
		}), func(x testkit.Exchange) int { return x.Seq % p }, // every group fills
			testkit.Perform,
			dispatch.WithParallelism(p), dispatch.WithMaxPending(budget), dispatch.WithScheduler(newParallel(t, 2)))
		synctest.Wait() // everything blocked: two handlers, a used-up budget, a waiting intake
		pulled := src.pulled.Load()
		assert.Equal(t, int64(budget+1), pulled, "the budget is used up, and no more")
		assert.Equal(t, pulled-1, d.Stats().InFlight, "the exchange the intake holds is received once admitted")
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: pulled, Failed: 2, Discarded: pulled - 2}, s)
	})
}

// panickingObserver panics in the method named by where, every time.
type panickingObserver struct {
	countingObserver
	where string
}

func (p *panickingObserver) Admitted(ctx context.Context, l dispatch.Labels) {
	p.countingObserver.Admitted(ctx, l)
	p.maybe("Admitted")
}

func (p *panickingObserver) Started(ctx context.Context, l dispatch.Labels, wait time.Duration) {
	p.countingObserver.Started(ctx, l, wait)
	p.maybe("Started")
}

func (p *panickingObserver) Finished(ctx context.Context, l dispatch.Labels, o dispatch.Outcome, took time.Duration, err error) {
	p.countingObserver.Finished(ctx, l, o, took, err)
	p.maybe("Finished")
}

func (p *panickingObserver) Discarded(ctx context.Context, l dispatch.Labels, reason error) {
	p.countingObserver.Discarded(ctx, l, reason)
	p.maybe("Discarded")
}

func (p *panickingObserver) maybe(method string) {
	if p.where == method {
		panic("observer " + method)
	}
}

// logCounter is a slog.Handler counting the records with a given message.
type logCounter struct {
	msg string
	n   atomic.Int64
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		l.n.Add(1)
	}
	return nil
}

func TestObserverPanicIsRecovered(t *testing.T) {
	xs := make([]testkit.Exchange, 100)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%10)), Seq: i / 10}
	}
	for _, where := range []string{"Admitted", "Started", "Finished", "Discarded"} {
		t.Run(where, func(t *testing.T) {
			obs := &panickingObserver{where: where}
			logs := &logCounter{msg: "dispatch: observer panicked"}
			var handled atomic.Int64
			first := make(chan struct{})
			d, err := dispatch.New("orders", orders, flux.FromSlice(xs), func(ctx context.Context, _ testkit.Exchange) error {
				if handled.Add(1) == 1 && where == "Discarded" {
					// Hold the only group until ForceStop drops the rest.
					close(first)
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}, dispatch.WithParallelism(1), dispatch.WithObserver(obs), dispatch.WithLogger(slog.New(logs)))
			require.NoError(t, err)
			require.NoError(t, d.Prepare(t.Context()))
			require.NoError(t, d.Start())
			if where == "Discarded" {
				<-first
				d.ForceStop()
			}
			<-d.Done()
			assert.NoError(t, d.Err())
			s := d.Stats()
			assert.Zero(t, s.InFlight)
			// Only the first panic is logged with its stack; the later ones
			// are counted (and logged once per 1024 without a stack).
			assert.EqualValues(t, 1, logs.n.Load(), "the first panic is logged")
			if where == "Discarded" {
				assert.Positive(t, s.Discarded)
				assert.Equal(t, s.Discarded, obs.discarded.Load(), "every discard reached the observer")
				return
			}
			assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 100}, s)
			assert.EqualValues(t, 100, handled.Load())
		})
	}
}

// finishedSignal is an Observer that sends each failure's outcome and error.
type finishedSignal struct {
	*countingObserver
	failures chan error
	outcomes chan dispatch.Outcome
}

func (f finishedSignal) Finished(ctx context.Context, l dispatch.Labels, o dispatch.Outcome, _ time.Duration, err error) {
	if err != nil {
		f.outcomes <- o
		f.failures <- err
	}
}

func TestHandlerGoexitFailsTheExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := finishedSignal{countingObserver: &countingObserver{}, failures: make(chan error, 1), outcomes: make(chan dispatch.Outcome, 1)}
		var calls atomic.Int64
		d := started(t, flux.FromSlice(exchanges(20, 4)), func(context.Context, testkit.Exchange) error {
			if calls.Add(1) == 6 {
				runtime.Goexit() // what t.FailNow does in a handler
			}
			return nil
		}, dispatch.WithParallelism(4), dispatch.WithScheduler(newParallel(t, 2)), dispatch.WithObserver(obs))
		assert.Equal(t, dispatch.OutcomePanic, <-obs.outcomes)
		err := <-obs.failures
		assert.ErrorIs(t, err, schedulers.ErrGoexit)
		var pe *dispatch.PanicError
		assert.ErrorAs(t, err, &pe)
		// The Goexit fails its exchange only: its group and the others go
		// on, and the dispatcher ends with its source.
		<-d.Done()
		assert.Equal(t, dispatch.Stats{Received: 20, Succeeded: 19, Failed: 1}, d.Stats())
		require.NoError(t, d.Err())
		assert.True(t, strings.HasPrefix(err.Error(), `dispatch: dispatcher "orders": handler: `), err.Error())
	})
}

// Stats is one snapshot: in every reading Received is the sum of the ended
// counters and InFlight, and InFlight is never above the pending budget
// plus the one exchange the source's goroutine holds while it waits for
// room, however fast the producer and the handlers move. (Read one after the other
// in the order ended-then-received, a reading preempted between the loads
// counted every exchange received meanwhile as in flight: 377 with a budget
// of 16.)
func TestStatsIsOneSnapshot(t *testing.T) {
	const budget, n = 16, 200_000
	d := started(t, flux.FromSlice(exchanges(n, 4096)), testkit.Perform,
		dispatch.WithMaxPending(budget))
	var worst int64
	readers := 4
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for !testkit.Closed(d.Done()) {
				s := d.Stats()
				if s.InFlight > budget+1 || s.InFlight < 0 || s.Received != s.Succeeded+s.Failed+s.Discarded+s.InFlight {
					t.Errorf("inconsistent snapshot %+v", s)
					return
				}
				runtime.Gosched() // a reader preempted between its loads
				if s.InFlight > atomic.LoadInt64(&worst) {
					atomic.StoreInt64(&worst, s.InFlight)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
	t.Logf("most in flight seen: %d", atomic.LoadInt64(&worst))
}

// An exchange whose aggregate id is empty names no aggregate: it fails
// alone with ErrInvalidGroupKey, with New and NewMain alike; the others go
// on.
func TestEmptyAggregateIDFailsAlone(t *testing.T) {
	xs := []testkit.Exchange{{ID: aggregate.NewID(orders, "")}, {ID: aggregate.NewID(orders, "a")}}
	var failures []error
	hook := dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
		if r.Err != nil {
			failures = append(failures, r.Err)
		}
	})
	d, err := dispatch.New("orders", orders, flux.FromSlice(xs), testkit.Perform, quietOf[testkit.Exchange](), hook)
	require.NoError(t, err)
	require.NoError(t, d.Run(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, d.Stats())
	m, err := dispatch.NewMain("events", []aggregate.NamedAggregate{orders}, flux.FromSlice(xs), testkit.Perform,
		&fakeSupplier{log: &callLog{}}, quietOf[testkit.Exchange](), hook)
	require.NoError(t, err)
	require.NoError(t, m.Run(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, m.Stats())
	require.Len(t, failures, 2)
	for _, err := range failures {
		assert.ErrorIs(t, err, dispatch.ErrInvalidGroupKey)
		assert.ErrorContains(t, err, "empty aggregate id")
	}
}

// Quiesce then ForceStop while Prepare is still in the supplier (the doc's
// "graceful, then force"): the stops touch the contexts only once Prepare
// published them (-race checks it).
func TestQuiesceThenForceDuringPrepare(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	sup, err := aggregate.NewSchedulerSupplier("edge", aggregate.WithSchedulerFactory(func(name string, n int) (schedulers.Scheduler, error) {
		close(entered)
		<-release
		return schedulers.NewParallel(name, n)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { sup.ForceStop(); <-sup.Done() }()
	d, err := dispatch.New("edge", orders, flux.FromSlice(exchanges(5, 1)), testkit.Perform, quiet,
		dispatch.WithSchedulerSupplier(sup))
	if err != nil {
		t.Fatal(err)
	}
	prepared := make(chan error, 1)
	go func() { prepared <- d.Prepare(context.Background()) }()
	<-entered
	d.Quiesce()      // NEW -> STOPPING, Prepare still in the supplier
	go d.ForceStop() // from STOPPING: "Prepare completed", it has not
	close(release)   // Prepare now writes the contexts; -race needs no overlap in time

	<-prepared
	<-d.Done()
}
