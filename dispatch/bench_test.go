package dispatch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// allocExchange is a value exchange larger than a pointer, the case where
// boxing into an interface would allocate.
type allocExchange struct {
	id  aggregate.ID
	seq int
}

func (x allocExchange) AggregateID() aggregate.ID { return x.id }

var allocIDs = func() []aggregate.ID {
	ids := make([]aggregate.ID, 256)
	for i := range ids {
		ids[i] = aggregate.NewID(orders, "order-"+strconv.Itoa(i))
	}
	return ids
}()

// benchAllocs pushes b.N exchanges of 256 ids through a channel into the
// dispatcher and waits until every one was handled. A nil key routes by
// aggregate id (New), else by key (NewKeyed).
func benchAllocs[T aggregate.IDCapable](b *testing.B, next func(i int) T, key func(T) int, opts ...dispatch.Option[T]) {
	b.ReportAllocs()
	in := make(chan T, 256)
	sched, err := schedulers.NewParallel("alloc", 2)
	if err != nil {
		b.Fatal(err)
	}
	h := func(context.Context, T) error { return nil }
	opts = append([]dispatch.Option[T]{dispatch.WithParallelism(64), dispatch.WithScheduler(sched)}, opts...)
	var d *dispatch.Dispatcher[T]
	if key == nil {
		d = started(b, flux.FromChannel(in), h, opts...)
	} else {
		d = startedKeyed(b, flux.FromChannel(in), key, h, opts...)
	}
	i := 0
	for b.Loop() {
		in <- next(i)
		i++
	}
	close(in)
	<-d.Done()
	if err := sched.DisposeGracefully(context.Background()); err != nil {
		b.Fatal(err)
	}
	if s := d.Stats(); s.Succeeded != int64(i) {
		b.Fatalf("handled %d of %d", s.Succeeded, i)
	}
}

// BenchmarkDispatcherAllocs measures the allocations per exchange of the
// dispatcher (target: at most 2), next to a plain channel hand-off to one
// goroutine as the baseline.
func BenchmarkDispatcherAllocs(b *testing.B) {
	b.Run("baseline=channel", func(b *testing.B) {
		b.ReportAllocs()
		in, done := make(chan allocExchange, 256), make(chan struct{})
		go func() {
			for range in {
			}
			close(done)
		}()
		for i := 0; b.Loop(); i++ {
			in <- allocExchange{id: allocIDs[i%256], seq: i}
		}
		close(in)
		<-done
	})
	b.Run("exchange=value/key=IDCapable", func(b *testing.B) {
		benchAllocs(b, func(i int) allocExchange { return allocExchange{id: allocIDs[i%256], seq: i} }, nil)
	})
	b.Run("exchange=pointer/key=IDCapable", func(b *testing.B) {
		xs := make([]allocExchange, 256)
		for i := range xs {
			xs[i].id = allocIDs[i]
		}
		benchAllocs(b, func(i int) *allocExchange { return &xs[i%256] }, nil)
	})
	b.Run("exchange=value/key=func", func(b *testing.B) {
		benchAllocs(b, func(i int) allocExchange { return allocExchange{id: allocIDs[i%256], seq: i} },
			func(x allocExchange) int { return x.id.Mod(64) })
	})
	b.Run("exchange=value/observer", func(b *testing.B) {
		benchAllocs(b, func(i int) allocExchange { return allocExchange{id: allocIDs[i%256], seq: i} }, nil,
			dispatch.WithObserver(&countingObserver{}))
	})
}
