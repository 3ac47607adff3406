package dispatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// The statements of the aggregate scheduler document, each as a test.

// "One materialized named aggregate reuses a Scheduler": dispatchers of one
// named aggregate, however it is spelled, share one scheduler of the
// supplier; another named aggregate gets its own.
func TestSeedOneSchedulerPerNamedAggregate(t *testing.T) {
	var created atomic.Int32
	sup, err := aggregate.NewSchedulerSupplier("dispatchers", aggregate.WithSchedulerFactory(
		func(name string, n int) (schedulers.Scheduler, error) {
			created.Add(1)
			return schedulers.NewParallel(name, n)
		}))
	require.NoError(t, err)
	spellings := []aggregate.NamedAggregate{orders, aggregate.NewID(orders, "order-1"), aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}}
	var ds []*dispatch.Dispatcher[testkit.Exchange]
	for _, named := range spellings {
		d, err := dispatch.New("d", named, flux.FromSlice(exchanges(10, 3)), testkit.Perform, dispatch.WithSchedulerSupplier(sup), quiet)
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		ds = append(ds, d)
	}
	assert.Equal(t, int32(1), created.Load(), "one scheduler for sales.Order")
	invoices := aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Invoice"}
	d, err := dispatch.New("d", invoices, flux.FromSlice(exchanges(10, 3)), testkit.Perform, dispatch.WithSchedulerSupplier(sup), quiet)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	assert.Equal(t, int32(2), created.Load(), "another for sales.Invoice")
	for _, d := range append(ds, d) {
		<-d.Done() // the source completes
		assert.Equal(t, int64(10), d.Stats().Succeeded)
	}
	require.NoError(t, sup.StopGracefully(t.Context()), "the supplier is stopped after its dispatchers")
}

// "One aggregateId.id maps to one group for a fixed dispatcher parallelism":
// "Aa" and "BB" have the same Java hash, so they share a group whatever the
// parallelism, and the group's serial order couples them; "id" (another
// group for parallelism 8) is not held up.
func TestSeedOneIDOneGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p = 8
		require.Equal(t, aggregate.GroupKey("Aa", p), aggregate.GroupKey("BB", p))
		require.NotEqual(t, aggregate.GroupKey("Aa", p), aggregate.GroupKey("id", p))
		release := make(chan struct{})
		var mu sync.Mutex
		var handled []string
		rec := func(_ context.Context, x testkit.Exchange) error {
			if x.ID.ID == "Aa" {
				<-release
			}
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, x.ID.ID)
			return nil
		}
		xs := []testkit.Exchange{{ID: aggregate.NewID(orders, "Aa")}, {ID: aggregate.NewID(orders, "BB")}}
		d := started(t, flux.FromSlice(xs), rec, dispatch.WithParallelism(p), dispatch.WithScheduler(newParallel(t, 4)))
		synctest.Wait()
		mu.Lock()
		assert.Empty(t, handled, "BB waits behind Aa in their common group")
		mu.Unlock()
		close(release)
		<-d.Done()
		assert.Equal(t, []string{"Aa", "BB"}, handled)

		other := started(t, flux.FromSlice([]testkit.Exchange{{ID: aggregate.NewID(orders, "id")}}), testkit.Perform,
			dispatch.WithParallelism(p))
		<-other.Done()
		assert.Equal(t, int64(1), other.Stats().Succeeded)
	})
}

// concurrency tracks how many handlers run at once.
type concurrency struct {
	now, max atomic.Int32
}

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

// run handles xs with a virtual delay each and returns the highest number of
// handlers seen running at once.
func maxConcurrency(t *testing.T, xs []testkit.Exchange, opts ...dispatch.Option[testkit.Exchange]) int32 {
	var c concurrency
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(aggregate.DefaultParallelism) },
		func(ctx context.Context, x testkit.Exchange) error {
			c.enter()
			defer c.leave()
			time.Sleep(time.Millisecond) // virtual handling time
			return nil
		})
	d := started(t, flux.FromSlice(xs), rec.Handle, opts...)
	<-d.Done()
	require.NoError(t, testkit.PerKeyFIFO(rec.Calls()))
	require.NoError(t, testkit.NoLoss(int64(len(xs)), d.Stats(), rec.Calls()))
	return c.max.Load()
}

// "Exchanges in one group enter the handler serially": one group, eight
// scheduler goroutines, still one handler at a time.
func TestSeedOneGroupIsSerial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := maxConcurrency(t, exchanges(200, 40), dispatch.WithParallelism(1), dispatch.WithScheduler(newParallel(t, 8)))
		assert.Equal(t, int32(1), got)
	})
}

// "Different IDs may run in different groups": with parallelism > 1,
// handlers of different ids overlap, up to the scheduler's parallelism and
// never beyond it.
func TestSeedDifferentIDsRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := maxConcurrency(t, exchanges(400, 40), dispatch.WithParallelism(64), dispatch.WithScheduler(newParallel(t, 4)))
		assert.Equal(t, int32(4), got, "at most the scheduler's parallelism, and reached")
	})
}

// The default key works for interface and pointer exchange types too (value
// types are what the other tests use): every exchange is handled once.
func TestDefaultGroupKeyForInterfaceAndPointerExchanges(t *testing.T) {
	ids := []string{"Aa", "BB", "order-1", "订单-1", "😀"}
	run := func(t *testing.T, xs []aggregate.IDCapable) {
		var mu sync.Mutex
		var seen []string
		d := started(t, flux.FromSlice(xs), func(_ context.Context, x aggregate.IDCapable) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, x.AggregateID().ID)
			return nil
		}, dispatch.WithParallelism(16), dispatch.WithScheduler(schedulers.Immediate()))
		<-d.Done()
		require.NoError(t, d.Err())
		assert.ElementsMatch(t, ids, seen)
	}
	values, pointers := make([]aggregate.IDCapable, len(ids)), make([]aggregate.IDCapable, len(ids))
	for i, id := range ids {
		x := testkit.Exchange{ID: aggregate.NewID(orders, id)}
		values[i], pointers[i] = x, &x
	}
	t.Run("interface", func(t *testing.T) { run(t, values) })
	t.Run("pointer", func(t *testing.T) { run(t, pointers) })
}
