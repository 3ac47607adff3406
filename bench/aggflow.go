package bench

// Everything that depends on aggflow's dispatcher API is in this file.

import (
	"context"
	"fmt"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

var benchAggregate = aggregate.MaterializedNamedAggregate{Context: "bench", Aggregate: "account"}

// AggregateID makes Exchange an aggregate.IDCapable, as New needs.
func (x Exchange) AggregateID() aggregate.ID {
	return aggregate.ID{Named: benchAggregate, ID: x.Key.ID(), TenantID: aggregate.DefaultTenantID}
}

// AggregateKey makes Exchange an aggregate.KeyCapable, so that with
// dispatch.WithAggregateKey the dispatcher routes it by x.Key.Mod(P), the
// key the other implementations use, rather than copying the ID and hashing.
func (x Exchange) AggregateKey() aggregate.Key { return x.Key }

var aggflowImpl = Impl{
	Name: "aggflow",
	What: "dispatch.New with defaults but WithParallelism(P) and WithAggregateKey: owned NewParallel(DefaultPoolSize) scheduler, default pending budget; the producer is the source (a dispatch.Source), so the intake runs on its goroutine",
	Run: func(r *Run) (int64, error) {
		return runAggflow(r, produce(r), dispatch.WithAggregateKey())
	},
}

var aggflowIDImpl = Impl{
	Name: "aggflow-id",
	What: "aggflow without WithAggregateKey: routed by AggregateID, its id hashed at every exchange",
	Run: func(r *Run) (int64, error) {
		return runAggflow(r, produce(r))
	},
}

// produce is r's producer as a dispatch.Source.
func produce(r *Run) producer {
	return func(_ context.Context, emit func(Exchange) error) error {
		return r.Produce(func(x Exchange) bool { return emit(x) == nil })
	}
}

// batchLen is how many exchanges aggflow-batch's producer hands over at a
// time, as a broker client's fetch would.
const batchLen = 256

var aggflowBatchImpl = Impl{
	Name: "aggflow-batch",
	What: fmt.Sprintf("aggflow, the producer handing over batches of %d through a dispatch.BatchSource", batchLen),
	Run: func(r *Run) (int64, error) {
		return runAggflow(r, dispatch.BatchSource(func(_ context.Context, emit func([]Exchange) error) error {
			batch := make([]Exchange, 0, batchLen)
			var err error
			perr := r.Produce(func(x Exchange) bool {
				if batch = append(batch, x); len(batch) == batchLen {
					err, batch = emit(batch), batch[:0]
				}
				return err == nil
			})
			if perr == nil && len(batch) > 0 {
				perr = emit(batch)
			}
			return perr
		}), dispatch.WithAggregateKey())
	},
}

// runAggflow runs the aggflow dispatcher of the benchmark on source.
func runAggflow(r *Run, source dispatch.Source[Exchange], opts ...dispatch.Option[Exchange]) (int64, error) {
	handler := func(_ context.Context, x Exchange) error {
		r.Handle(x)
		return nil
	}
	d, err := dispatch.New("bench", benchAggregate, source, handler, append(opts, dispatch.WithParallelism(r.P))...)
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
}

var aggflowRxgoImpl = Impl{
	Name: "aggflow-rxgo",
	What: "rxgo at both ends: the producer sends into rxgo.FromChannel(32), flux.FromObservable makes it the dispatcher's source, and the dispatcher's Results (buffer 32) are observed as an rxgo Observable that counts the successes",
	Run: func(r *Run) (int64, error) {
		in := make(chan rxgo.Item, GroupBuffer)
		results, err := dispatch.NewResults[Exchange](GroupBuffer)
		if err != nil {
			return 0, err
		}
		handler := func(_ context.Context, x Exchange) error {
			r.Handle(x)
			return nil
		}
		d, err := dispatch.New("bench", benchAggregate, flux.FromObservable[Exchange](rxgo.FromChannel(in)), handler,
			dispatch.WithParallelism(r.P), dispatch.WithResults(results))
		if err != nil {
			return 0, err
		}
		ran := make(chan error, 1)
		go func() { ran <- d.Run(context.Background()) }()
		counted := make(chan int64, 1)
		go func() {
			var n int64
			for it := range results.Observable(context.Background()).Observe() {
				if !it.Error() && it.V.(dispatch.Result[Exchange]).Outcome == dispatch.OutcomeSuccess {
					n++
				}
			}
			counted <- n
		}()
		perr := r.Produce(func(x Exchange) bool {
			in <- rxgo.Of(x)
			return true
		})
		close(in)
		if err := <-ran; err != nil {
			return 0, err
		}
		n := <-counted
		if perr != nil {
			return n, perr
		}
		if s := d.Stats(); s.Succeeded != n || results.Dropped() != 0 {
			return n, fmt.Errorf("bench: aggflow-rxgo: %d results observed, %d dropped, %+v", n, results.Dropped(), s)
		}
		return n, nil
	},
}

// producer is a dispatch.Source made of a function: the producer's loop
// calls emit for each exchange, on its own goroutine.
type producer func(ctx context.Context, emit func(Exchange) error) error

func (p producer) Subscribe(ctx context.Context, emit func(Exchange) error) error {
	return p(ctx, emit)
}
