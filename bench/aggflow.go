package bench

// Everything that depends on aggflow's dispatcher API is in this file.

import (
	"context"
	"fmt"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
)

var benchAggregate = aggregate.MaterializedNamedAggregate{Context: "bench", Aggregate: "account"}

// AggregateID makes Exchange an aggregate.IDCapable, so the dispatcher keys
// it by aggregate.GroupKey(x.ID, P) as it keys any exchange.
func (x Exchange) AggregateID() aggregate.ID {
	return aggregate.ID{Named: benchAggregate, ID: x.ID, TenantID: aggregate.DefaultTenantID}
}

var aggflowImpl = Impl{
	Name: "aggflow",
	What: "dispatch.New with defaults but WithParallelism(P): owned NewParallel(DefaultPoolSize) scheduler, default pending budget; the producer is the source (a dispatch.Source), so the intake runs on its goroutine",
	Run: func(r *Run) (int64, error) {
		source := producer(func(_ context.Context, emit func(Exchange) error) error {
			return r.Produce(func(x Exchange) bool { return emit(x) == nil })
		})
		handler := func(_ context.Context, x Exchange) error {
			r.Handle(&x)
			return nil
		}
		d, err := dispatch.New("bench", benchAggregate, source, handler, dispatch.WithParallelism[Exchange](r.P))
		if err != nil {
			return 0, err
		}
		if err := d.Run(context.Background()); err != nil {
			return 0, err
		}
		s := d.Stats()
		if err := d.Err(); err != nil {
			return s.Succeeded, err
		}
		if s.Failed+s.Discarded+s.InFlight != 0 {
			return s.Succeeded, fmt.Errorf("bench: aggflow: %+v", s)
		}
		return s.Succeeded, nil
	},
}

// producer is a dispatch.Source made of a function: the producer's loop
// calls emit for each exchange, on its own goroutine.
type producer func(ctx context.Context, emit func(Exchange) error) error

func (p producer) Subscribe(ctx context.Context, emit func(Exchange) error) error {
	return p(ctx, emit)
}
