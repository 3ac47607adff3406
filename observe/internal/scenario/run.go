package scenario

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/observe/internal/adapter"
	"github.com/aggflow/aggflow/testkit"
)

// The named aggregates of Run: the main dispatcher has lanes for Orders and
// Invoices, none for Refunds.
var (
	Orders   = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}
	Invoices = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Invoice"}
	Refunds  = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Refund"}
)

const (
	// MainName is the MainDispatcher's name; its children are
	// "sales-Order" and "sales-Invoice".
	MainName = "sales"
	// ForcedName is the dispatcher stopped by force.
	ForcedName = "orders-forced"
	// MaxPending is both dispatchers' pending budget.
	MaxPending = 64
	// forcedQueued is how many exchanges wait behind the forced
	// dispatcher's blocked one, and are discarded by its ForceStop.
	forcedQueued = 5
)

// Hooks plug an adapter into Run.
type Hooks struct {
	// Observer is given to both dispatchers.
	Observer dispatch.Observer
	// Register registers d with the adapter's gauges before d starts.
	Register func(d adapter.Dispatcher)
	// Blocked runs while the forced dispatcher's handler is blocked and the
	// rest of its exchanges wait: want is what its gauges show then.
	Blocked func(want adapter.Gauges)
}

// plan is one exchange of the main run's source.
type plan struct {
	named aggregate.MaterializedNamedAggregate
	do    testkit.Behaviour
	delay time.Duration
}

// mainPlan interleaves the three aggregates; the ids cycle over three per
// aggregate.
var mainPlan = []plan{
	{Orders, testkit.Instant, 0}, {Invoices, testkit.Instant, 0}, {Orders, testkit.Delay, 2 * time.Millisecond},
	{Invoices, testkit.Fail, 0}, {Refunds, testkit.Instant, 0}, {Orders, testkit.Fail, 0},
	{Orders, testkit.Instant, 0}, {Invoices, testkit.Panic, 0}, {Orders, testkit.Panic, 0},
	{Invoices, testkit.Panic, 0}, {Orders, testkit.Delay, 3 * time.Millisecond}, {Invoices, testkit.Delay, 5 * time.Millisecond},
	{Refunds, testkit.Instant, 0}, {Orders, testkit.Instant, 0}, {Orders, testkit.Fail, 0},
	{Invoices, testkit.Instant, 0}, {Orders, testkit.Instant, 0},
}

// outcomeOf is what the dispatcher makes of a handler doing b (Block is
// ended by a force: cancelled).
var outcomeOf = map[testkit.Behaviour]dispatch.Outcome{
	testkit.Instant: dispatch.OutcomeSuccess, testkit.Delay: dispatch.OutcomeSuccess,
	testkit.Fail: dispatch.OutcomeError, testkit.Panic: dispatch.OutcomePanic,
	testkit.Block: dispatch.OutcomeCancelled,
}

// Run runs, in t's testing/synctest bubble (so that a handler's time is
// exactly its virtual delay), a MainDispatcher of Orders and Invoices over
// a source that also carries Refunds, to its end; then a Dispatcher of
// Orders with one group whose first handler blocks until a ForceStop that
// discards the rest. It returns what the metrics must show.
func Run(t *testing.T, h Hooks) Want {
	want := newWant()
	ctx := context.Background()
	supplier, err := aggregate.NewSchedulerSupplier(MainName)
	require.NoError(t, err)
	m, err := dispatch.NewMain(MainName, []aggregate.NamedAggregate{Orders, Invoices},
		flux.FromSlice(mainExchanges(&want)), handle, supplier, options(h.Observer)...)
	require.NoError(t, err)
	h.Register(m)
	require.NoError(t, m.Prepare(ctx))
	require.NoError(t, m.Start())
	<-m.Done()
	require.NoError(t, m.Err())
	require.NoError(t, supplier.StopGracefully(ctx))
	want.Gauges[MainName] = adapter.Gauges{Limit: MaxPending}

	d, err := dispatch.New(ForcedName, Orders, flux.FromSlice(forcedExchanges(&want)), handle,
		append(options(h.Observer), dispatch.WithParallelism(1))...)
	require.NoError(t, err)
	h.Register(d)
	require.NoError(t, d.Prepare(ctx))
	require.NoError(t, d.Start())
	synctest.Wait() // the handler blocks; the rest wait in its group
	blocked := adapter.Gauges{InFlight: 1 + forcedQueued, Pending: 1 + forcedQueued, Limit: MaxPending}
	require.Equal(t, blocked, GaugesOf(t, d))
	h.Blocked(blocked)
	d.ForceStop()
	<-d.Done()
	want.Gauges[ForcedName] = adapter.Gauges{Limit: MaxPending}
	return want
}

func handle(ctx context.Context, x testkit.Exchange) error { return testkit.Perform(ctx, x) }

func options(obs dispatch.Observer) []dispatch.Option[testkit.Exchange] {
	return []dispatch.Option[testkit.Exchange]{
		dispatch.WithObserver(obs),
		dispatch.WithMaxPending(MaxPending),
		dispatch.WithParallelism(8),
		dispatch.WithLogger(slog.New(slog.DiscardHandler)),
	}
}

// build makes the exchanges of plans, ids cycling over three per named
// aggregate, and calls expect with each plan and its index, to add to want
// what that exchange must show.
func build(want *Want, plans []plan, expect func(i int, p plan)) []testkit.Exchange {
	xs := make([]testkit.Exchange, len(plans))
	seq := map[aggregate.ID]int{}
	for i, p := range plans {
		id := aggregate.NewID(p.named, p.named.Aggregate+"-"+string(rune('a'+i%3)))
		xs[i] = testkit.Exchange{ID: id, Seq: seq[id], Do: p.do, Delay: p.delay}
		seq[id]++
		want.IDs = append(want.IDs, id.ID)
		expect(i, p)
	}
	return xs
}

// mainExchanges are those of the main run: the MainDispatcher routes an
// exchange of a named aggregate it has lanes for to its child
// "<main>-<aggregate>", and discards the others under its own name and the
// zero aggregate.
func mainExchanges(want *Want) []testkit.Exchange {
	return build(want, mainPlan, func(_ int, p plan) {
		if p.named == Refunds {
			want.discarded(dispatch.Labels{Dispatcher: MainName})
			return
		}
		l := dispatch.Labels{Dispatcher: MainName + "-" + p.named.Aggregate, Aggregate: p.named}
		want.started(l)
		want.handled(l, outcomeOf[p.do], p.delay.Seconds())
	})
}

// forcedExchanges are those of the forced run: the first blocks until the
// ForceStop cancels it, which discards the others, queued behind it.
func forcedExchanges(want *Want) []testkit.Exchange {
	plans := make([]plan, 1+forcedQueued)
	plans[0] = plan{Orders, testkit.Block, 0}
	for i := range forcedQueued {
		plans[1+i] = plan{Orders, testkit.Instant, 0}
	}
	return build(want, plans, func(i int, p plan) {
		l := dispatch.Labels{Dispatcher: ForcedName, Aggregate: p.named}
		if i > 0 {
			want.discarded(l)
			return
		}
		want.started(l)
		want.handled(l, outcomeOf[p.do], 0) // no virtual time passes before the force
	})
}
