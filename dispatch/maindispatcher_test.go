package dispatch_test

import (
	"context"
	"errors"
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

var (
	invoices = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Invoice"}
	payments = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Payment"}
)

// mixed returns n exchanges alternating over the given named aggregates,
// over ids ids each, with per-id sequence numbers.
func mixed(n, ids int, named ...aggregate.MaterializedNamedAggregate) []testkit.Exchange {
	xs := make([]testkit.Exchange, n)
	seq := map[aggregate.ID]int{}
	for i := range xs {
		id := aggregate.NewID(named[i%len(named)], itoa(i/len(named)%ids))
		xs[i] = testkit.Exchange{ID: id, Seq: seq[id]}
		seq[id]++
	}
	return xs
}

// countingSupplier is a real supplier whose factory counts the schedulers it
// made, by name. The test owns it: it is stopped at the end of the test (a
// main dispatcher only borrows it).
func countingSupplier(t *testing.T) (*aggregate.Supplier, *sync.Map) {
	t.Helper()
	var names sync.Map
	sup, err := aggregate.NewSchedulerSupplier("main", aggregate.WithParallelism(2), aggregate.WithSchedulerFactory(
		func(name string, n int) (schedulers.Scheduler, error) {
			names.Store(name, true)
			return schedulers.NewParallel(name, n)
		}))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.StopGracefully(context.Background())) })
	return sup, &names
}

func newMain(t *testing.T, source dispatch.Source[testkit.Exchange], h dispatch.Handler[testkit.Exchange], sup aggregate.SchedulerSupplier,
	opts ...dispatch.Option[testkit.Exchange]) *dispatch.MainDispatcher[testkit.Exchange] {
	t.Helper()
	m, err := dispatch.NewMain("events", []aggregate.NamedAggregate{orders, invoices}, source, h, sup, append([]dispatch.Option[testkit.Exchange]{quiet}, opts...)...)
	require.NoError(t, err)
	return m
}

func TestMainRoutesByNamedAggregate(t *testing.T) {
	sup, names := countingSupplier(t)
	xs := mixed(300, 7, orders, invoices, payments)
	var (
		mu      sync.Mutex
		seen    = map[aggregate.MaterializedNamedAggregate]int{}
		unknown []testkit.Exchange
	)
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag {
		return testkit.Tag{Key: x.ID.String(), Seq: x.Seq, Group: x.ID.Mod(8)}
	}, func(ctx context.Context, x testkit.Exchange) error {
		mu.Lock()
		seen[x.ID.Named]++
		mu.Unlock()
		return nil
	})
	m := newMain(t, flux.FromSlice(xs), rec.Handle, sup, dispatch.WithParallelism(8),
		dispatch.WithDiscardHook(func(x testkit.Exchange, reason error) {
			assert.ErrorIs(t, reason, dispatch.ErrUnknownAggregate)
			mu.Lock()
			unknown = append(unknown, x)
			mu.Unlock()
		}))
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	<-m.Done()
	require.NoError(t, m.Err())
	assert.Equal(t, map[aggregate.MaterializedNamedAggregate]int{orders: 100, invoices: 100}, seen)
	assert.Len(t, unknown, 100)
	assert.Equal(t, dispatch.Stats{Received: 300, Succeeded: 200, Discarded: 100}, m.Stats())
	assert.NoError(t, testkit.PerKeyFIFO(rec.Calls()))
	n := 0
	names.Range(func(k, _ any) bool { n++; return true })
	assert.Equal(t, 2, n, "one scheduler per named aggregate")
	_, ok := names.Load("main-Order")
	assert.True(t, ok)
	// The supplier is lent: the main dispatcher leaves it running for its
	// owner to stop.
	s, err := sup.GetOrInitialize(orders)
	require.NoError(t, err, "the main dispatcher does not stop the supplier it borrows")
	assert.False(t, s.IsDisposed())
}

func TestMainPreparesInOrder(t *testing.T) {
	log := &callLog{}
	m, err := dispatch.NewMain("events", []aggregate.NamedAggregate{invoices, orders}, flux.Empty[testkit.Exchange](),
		testkit.Perform, &fakeSupplier{log: log}, quiet)
	require.NoError(t, err)
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	<-m.Done()
	assert.Equal(t, []string{"supplier:get:Invoice", "supplier:get:Order"}, log.get(), "and the supplier is not stopped: it is lent")
}

// A busy aggregate type does not hold up another: its handlers take the
// goroutines of its own scheduler only.
func TestMainBusyAggregateDoesNotStarveAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, _ := countingSupplier(t)
		xs := mixed(40, 1, orders, invoices) // 20 orders of one id, 20 invoices
		for i := range xs {
			if xs[i].ID.Named == orders {
				xs[i].Do, xs[i].Delay = testkit.Delay, time.Second
			}
		}
		var invoicesDone atomic.Int64
		start := time.Now()
		var invoicesAt time.Duration
		m := newMain(t, flux.FromSlice(xs), func(ctx context.Context, x testkit.Exchange) error {
			err := testkit.Perform(ctx, x)
			if x.ID.Named == invoices && invoicesDone.Add(1) == 20 {
				invoicesAt = time.Since(start)
			}
			return err
		}, sup)
		require.NoError(t, m.Prepare(t.Context()))
		require.NoError(t, m.Start())
		<-m.Done()
		assert.Zero(t, invoicesAt, "every invoice handled at once")
		assert.Equal(t, 20*time.Second, time.Since(start), "while the orders took their time")
	})
}

func TestMainForceStopAccountsForEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, _ := countingSupplier(t)
		xs := mixed(500, 20, orders, invoices)
		for i := range xs {
			xs[i].Do = testkit.Block
		}
		var hooked atomic.Int64
		m := newMain(t, flux.FromSlice(xs), testkit.Perform, sup, dispatch.WithParallelism(4), dispatch.WithMaxPending(16),
			dispatch.WithDiscardHook(func(_ testkit.Exchange, reason error) {
				assert.ErrorIs(t, reason, dispatch.ErrForceStopped)
				hooked.Add(1)
			}))
		require.NoError(t, m.Prepare(t.Context()))
		require.NoError(t, m.Start())
		synctest.Wait() // handlers blocked, the budget used up, the intake waiting
		m.ForceStop()
		m.ForceStop()
		assert.Equal(t, component.StateStopped, m.State())
		<-m.Done()
		s := m.Stats()
		assert.Zero(t, s.InFlight)
		assert.Equal(t, s.Received, s.Failed+s.Discarded)
		assert.Equal(t, hooked.Load(), s.Discarded)
		assert.Greater(t, s.Failed, int64(0), "the running handlers were cancelled")
		assert.Equal(t, int64(16+1), s.Received, "bounded: the intake was held back by the budget")
		assert.NoError(t, m.StopGracefully(t.Context()))
	})
}

// endless returns the i-th exchange of an endless alternation of orders and
// invoices of one id each, taking a millisecond; the failing-th fails.
func endless(failing int) func(i int) testkit.Exchange {
	return func(i int) testkit.Exchange {
		named := []aggregate.MaterializedNamedAggregate{orders, invoices}[i%2]
		x := testkit.Exchange{ID: aggregate.NewID(named, "a"), Seq: i / 2, Do: testkit.Delay, Delay: time.Millisecond}
		if i == failing {
			x.Do = testkit.Fail
		}
		return x
	}
}

func TestMainGracefulDrainsWhatWasRouted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, _ := countingSupplier(t)
		src := &countingSource{}
		m := newMain(t, src.flux(-1, endless(-1)), testkit.Perform, sup)
		require.NoError(t, m.Prepare(t.Context()))
		require.NoError(t, m.Start())
		time.Sleep(50 * time.Millisecond) // virtual
		require.NoError(t, m.StopGracefully(t.Context()))
		s := m.Stats()
		assert.Equal(t, src.pulled.Load(), s.Received)
		assert.Equal(t, s.Received, s.Succeeded+s.Discarded)
		assert.LessOrEqual(t, s.Discarded, int64(1), "at most the exchange the source had in hand")
	})
}

func TestMainStopOnErrorStopsRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sup, _ := countingSupplier(t)
		src := &countingSource{}
		m := newMain(t, src.flux(-1, endless(31)), testkit.Perform, sup, dispatch.WithErrorPolicy(dispatch.StopOnError))
		require.NoError(t, m.Prepare(t.Context()))
		require.NoError(t, m.Start())
		<-m.Done() // an endless source, stopped by the failure
		require.ErrorIs(t, m.Err(), testkit.ErrInjected)
		s := m.Stats()
		assert.Equal(t, src.pulled.Load(), s.Received)
		assert.Equal(t, int64(1), s.Failed)
		assert.Zero(t, s.InFlight)
	})
}

func TestMainLifecycle(t *testing.T) {
	sup, _ := countingSupplier(t)
	m := newMain(t, flux.FromSlice(mixed(10, 2, orders)), testkit.Perform, sup)
	assert.ErrorIs(t, m.Start(), dispatch.ErrIllegalState)
	require.NoError(t, m.Prepare(t.Context()))
	assert.ErrorIs(t, m.Prepare(t.Context()), dispatch.ErrIllegalState)
	m.Quiesce() // before Start: ends empty
	<-m.Done()
	assert.Equal(t, component.StateStopped, m.State())
	assert.Equal(t, dispatch.Stats{}, m.Stats())
	assert.ErrorIs(t, m.Start(), dispatch.ErrIllegalState, "no restart, and no silent no-op")

	for _, stop := range []func(*dispatch.MainDispatcher[testkit.Exchange]){
		(*dispatch.MainDispatcher[testkit.Exchange]).Quiesce,
		(*dispatch.MainDispatcher[testkit.Exchange]).ForceStop,
	} {
		log := &callLog{}
		m := newMain(t, flux.Empty[testkit.Exchange](), testkit.Perform, &fakeSupplier{log: log})
		stop(m) // before Prepare
		<-m.Done()
		assert.Empty(t, log.get(), "the lent supplier is neither asked nor stopped")
		assert.ErrorIs(t, m.Prepare(t.Context()), dispatch.ErrIllegalState)
		m.ForceStop() // after the stop that came first: a no-op, not a crash
		m.Quiesce()
		assert.Equal(t, component.StateStopped, m.State())
	}
}

// A supplier's error fails Prepare and leaves the main dispatcher in
// StateNew, as a Dispatcher (before, it stopped itself); a stop ends it.
func TestMainPrepareFailure(t *testing.T) {
	sup, _ := countingSupplier(t)
	require.NoError(t, sup.StopGracefully(t.Context()))
	m := newMain(t, flux.FromSlice(mixed(10, 2, orders)), testkit.Perform, sup)
	err := m.Prepare(t.Context())
	require.ErrorIs(t, err, aggregate.ErrStopped)
	assert.ErrorContains(t, err, `main dispatcher "events"`)
	assert.Equal(t, component.StateNew, m.State())
	m.ForceStop()
	<-m.Done()
	assert.Equal(t, component.StateStopped, m.State())
}

func TestNewMainValidates(t *testing.T) {
	sup := &fakeSupplier{log: &callLog{}}
	src := flux.Empty[testkit.Exchange]()
	for name, build := range map[string]func() error{
		"empty name": func() error {
			_, err := dispatch.NewMain("", nil, src, testkit.Perform, sup)
			return err
		},
		"nil supplier": func() error {
			_, err := dispatch.NewMain("m", nil, src, testkit.Perform, nil)
			return err
		},
		"duplicate": func() error {
			_, err := dispatch.NewMain("m", []aggregate.NamedAggregate{orders, aggregate.NewID(orders, "x")}, src, testkit.Perform, sup)
			return err
		},
	} {
		assert.ErrorIs(t, build(), dispatch.ErrInvalidArgument, name)
	}
	_, err := dispatch.NewMain("m", []aggregate.NamedAggregate{orders}, src, testkit.Perform, sup, dispatch.WithScheduler(schedulers.Immediate()))
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
	_, err = dispatch.NewMain("m", []aggregate.NamedAggregate{orders}, src, testkit.Perform, sup, dispatch.WithSchedulerSupplier(sup))
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
	_, err = dispatch.NewMain("m", []aggregate.NamedAggregate{orders, nil}, src, testkit.Perform, sup)
	assert.ErrorIs(t, err, dispatch.ErrInvalidArgument, "a nil named aggregate")
	_, err = dispatch.NewMain("m", []aggregate.NamedAggregate{orders}, src, testkit.Perform, sup, dispatch.WithParallelism(0))
	assert.True(t, errors.Is(err, dispatch.ErrInvalidParallelism))
}

// panickyID is an exchange whose AggregateID panics when bad, as a nil
// pointer exchange does.
type panickyID struct {
	id  string
	bad bool
}

func (p panickyID) AggregateID() aggregate.ID {
	if p.bad {
		panic("no id")
	}
	return aggregate.NewID(orders, p.id)
}

func TestMainAggregateIDPanicFailsOneExchange(t *testing.T) {
	xs := make([]panickyID, 100)
	for i := range xs {
		xs[i] = panickyID{id: itoa(i % 7), bad: i == 50}
	}
	var handled atomic.Int64
	obs := &countingObserver{}
	sup, err := aggregate.NewSchedulerSupplier("s", aggregate.WithParallelism(2))
	require.NoError(t, err)
	m, err := dispatch.NewMain("main", []aggregate.NamedAggregate{orders}, flux.FromSlice(xs),
		func(context.Context, panickyID) error { handled.Add(1); return nil }, sup,
		quietOf[panickyID](), dispatch.WithParallelism(4), dispatch.WithObserver(obs))
	require.NoError(t, err)
	require.NoError(t, m.Prepare(t.Context()))
	require.NoError(t, m.Start())
	<-m.Done()

	assert.NoError(t, m.Err(), "the source did not fail")
	assert.Equal(t, dispatch.Stats{Received: 100, Succeeded: 99, Failed: 1}, m.Stats())
	assert.EqualValues(t, 99, handled.Load(), "the exchanges after the bad one are routed too")
	require.EqualValues(t, 1, obs.finished[dispatch.OutcomeError].Load())
	assert.ErrorIs(t, obs.errs[0], dispatch.ErrInvalidGroupKey)
	var pe *dispatch.PanicError
	assert.ErrorAs(t, obs.errs[0], &pe)
	require.NoError(t, sup.StopGracefully(t.Context()), "the owner stops its supplier")
}
