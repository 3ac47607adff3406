package dispatch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/reactivex/rxgo/v2"
)

// The baselines run the same workloads as the dispatcher, fed from the same
// kind of source (a channel the benchmark pushes into), so that the results
// read as ratios.

// benchInline calls the handler on the pushing goroutine: no concurrency at all.
func benchInline(_ *testing.B, _ int, h *benchHandler) benchRun {
	return benchRun{push: h.handle, stop: func() {}}
}

// benchSharded is the hand-written shape: a router goroutine reads the source
// channel and sends each exchange to one of p goroutines by GroupKey.
func benchSharded(_ *testing.B, p int, h *benchHandler) benchRun {
	in := make(chan benchExchange, benchBuffer)
	shards := make([]chan benchExchange, p)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = make(chan benchExchange, benchBuffer)
		wg.Go(func() {
			for x := range shards[i] {
				h.handle(x)
			}
		})
	}
	wg.Go(func() {
		for x := range in {
			shards[aggregate.GroupKey(x.id.ID, p)] <- x
		}
		for _, s := range shards {
			close(s)
		}
	})
	return benchRun{
		push: func(x benchExchange) { in <- x },
		stop: func() { close(in); wg.Wait() },
	}
}

// benchRxgoGroupBy is rxgo's own grouping: GroupBy with buffered channels and a
// goroutine per group.
func benchRxgoGroupBy(_ *testing.B, p int, h *benchHandler) benchRun {
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan rxgo.Item, benchBuffer)
	groups := rxgo.FromChannel(in, rxgo.WithContext(ctx)).GroupBy(p, func(it rxgo.Item) int {
		return aggregate.GroupKey(it.V.(benchExchange).id.ID, p)
	}, rxgo.WithBufferedChannel(benchBuffer), rxgo.WithContext(ctx))
	var wg sync.WaitGroup
	for g := range groups.Observe(rxgo.WithContext(ctx)) {
		group := g.V.(rxgo.Observable)
		wg.Go(func() {
			for it := range group.Observe(rxgo.WithContext(ctx)) {
				h.handle(it.V.(benchExchange))
			}
		})
	}
	return benchRun{
		push: func(x benchExchange) { in <- rxgo.Of(x) },
		stop: func() { close(in); wg.Wait(); cancel() },
	}
}
