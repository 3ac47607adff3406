package dispatch_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// benchBuffer is the per-group (per-shard) buffer of the baselines; the
// dispatcher gets the same memory bound as one pending budget of
// parallelism x benchBuffer exchanges.
const benchBuffer = 32

// benchAggflow is the dispatcher under test, on its own parallel scheduler of
// schedulers.DefaultPoolSize goroutines.
func benchAggflow(b *testing.B, p int, h *benchHandler) benchRun {
	in := make(chan benchExchange, benchBuffer)
	sched, err := schedulers.NewParallel("bench", schedulers.DefaultPoolSize)
	if err != nil {
		b.Fatal(err)
	}
	d := started(b, flux.FromChannel(in),
		func(_ context.Context, x benchExchange) error { h.handle(x); return nil },
		dispatch.WithParallelism(p), dispatch.WithScheduler(sched),
		dispatch.WithMaxPending(p*benchBuffer))
	return benchRun{
		push: func(x benchExchange) { in <- x },
		stop: func() {
			close(in) // the source completes, the dispatcher drains and stops
			<-d.Done()
			if err := sched.DisposeGracefully(context.Background()); err != nil {
				b.Error(err)
			}
		},
	}
}

// BenchmarkDispatch compares the dispatcher with its baselines on the same
// workloads: handler cost x key distribution x parallelism (groups).
func BenchmarkDispatch(b *testing.B) {
	workloads := []workload{uniformWorkload(1), uniformWorkload(16), uniformWorkload(256),
		uniformWorkload(10_000), flightsWorkload(b)}
	impls := []struct {
		name string
		run  func(*testing.B, int, *benchHandler) benchRun
	}{
		{"aggflow", benchAggflow},
		{"inline", benchInline},
		{"sharded-goroutines", benchSharded},
		{"rxgo-groupby", benchRxgoGroupBy},
	}
	for _, cost := range []time.Duration{0, time.Microsecond} {
		handler := "handler=noop"
		if cost > 0 {
			handler = "handler=cpu1us"
		}
		for _, w := range workloads {
			for _, p := range []int{1, 16, 64 * runtime.GOMAXPROCS(0)} {
				for _, impl := range impls {
					name := fmt.Sprintf("%s/%s/parallelism=%d/impl=%s", handler, w.name, p, impl.name)
					b.Run(name, func(b *testing.B) {
						h := newBenchHandler(cost)
						measure(b, w, h, impl.run(b, p, h))
					})
				}
			}
		}
	}
}

// BenchmarkEmit compares the push-style intakes on one producer goroutine,
// noop handler, 128 groups, the default pool: Emit per exchange, and
// EmitBatch of batches of 16 and 256 (a broker fetch). ns/op is per
// exchange.
func BenchmarkEmit(b *testing.B) {
	for _, w := range []workload{uniformWorkload(1), uniformWorkload(1024), uniformWorkload(100_000)} {
		xs := make([]benchExchange, len(w.ids))
		for i, id := range w.ids {
			xs[i] = benchExchange{id: id}
		}
		for _, batch := range []int{1, 16, 256} {
			name := fmt.Sprintf("%s/impl=emit", w.name)
			if batch > 1 {
				name = fmt.Sprintf("%s/impl=emitbatch-%d", w.name, batch)
			}
			b.Run(name, func(b *testing.B) {
				d := started(b, nil, func(context.Context, benchExchange) error { return nil },
					dispatch.WithParallelism(128))
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for sent := 0; sent < b.N; {
					i := sent % len(xs)
					k := min(batch, b.N-sent, len(xs)-i)
					if batch == 1 {
						if err := d.Emit(ctx, xs[i]); err != nil {
							b.Fatal(err)
						}
					} else if _, err := d.EmitBatch(ctx, xs[i:i+k]); err != nil {
						b.Fatal(err)
					}
					sent += k
				}
				if err := d.StopGracefully(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
