package scenario

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// benchIDs is the number of aggregate ids of BenchDispatch's exchanges.
const benchIDs = 1024

// BenchDispatch measures one exchange through a Dispatcher of Orders with
// obs as its Observer (none when nil): b.N exchanges of benchIDs ids, a
// handler that returns at once, the default groups and pending budget, on a
// scheduler of schedulers.DefaultPoolSize goroutines. Run it with and
// without an adapter in one run: the difference is the adapter's cost per
// exchange (its Observer calls and the two clock reads that timing needs).
func BenchDispatch(b *testing.B, obs dispatch.Observer) {
	xs := make([]testkit.Exchange, b.N)
	for i := range xs {
		xs[i] = testkit.Exchange{ID: aggregate.NewID(Orders, strconv.Itoa(i%benchIDs))}
	}
	sched, err := schedulers.NewParallel("bench", schedulers.DefaultPoolSize)
	if err != nil {
		b.Fatal(err)
	}
	opts := []dispatch.Option[testkit.Exchange]{dispatch.WithScheduler(sched)}
	if obs != nil {
		opts = append(opts, dispatch.WithObserver(obs))
	}
	d, err := dispatch.New("bench", Orders, flux.FromSlice(xs), handle, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Prepare(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	<-d.Done()
	b.StopTimer()
	if err := sched.DisposeGracefully(ctx); err != nil {
		b.Fatal(err)
	}
	if s := d.Stats(); s.Succeeded != int64(b.N) {
		b.Fatalf("handled %d of %d exchanges", s.Succeeded, b.N)
	}
}

// BenchEvents measures the events of one handled exchange (Admitted,
// Started, Finished) on obs, from parallel goroutines over the label
// choices of Events: the adapter's own cost without a dispatcher around.
func BenchEvents(b *testing.B, obs dispatch.Observer) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l := labelChoices[i%len(labelChoices)]
			obs.Admitted(ctx, l)
			obs.Started(ctx, l, 1500)
			obs.Finished(ctx, l, dispatch.OutcomeSuccess, 2500, nil)
			i++
		}
	})
}

// Nop is an Observer that does nothing: with it, BenchDispatch measures
// what observing costs the dispatcher itself (timing, the guarded calls),
// apart from any adapter.
type Nop struct{}

func (Nop) Admitted(context.Context, dispatch.Labels)                                         {}
func (Nop) Started(context.Context, dispatch.Labels, time.Duration)                           {}
func (Nop) Finished(context.Context, dispatch.Labels, dispatch.Outcome, time.Duration, error) {}
func (Nop) Discarded(context.Context, dispatch.Labels, error)                                 {}
