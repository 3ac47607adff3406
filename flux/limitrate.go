package flux

import "context"

// defaultPrefetch is the size of the queue per source of Merge,
// MergeDelayError, Zip and CombineLatest, their default prefetch.
const defaultPrefetch = 32

// maxPrefetch caps the queue size LimitRate asks for: a channel's buffer is
// allocated whole when the operator is subscribed, so LimitRate(math.MaxInt),
// an unbounded rate, must not become a make that panics or exhausts
// memory. A smaller queue still bounds what is pulled ahead by n.
const maxPrefetch = 1 << 16

// prefetchKey is the context key under which LimitRate tells the combining
// operators upstream of it their prefetch; 0 means "the default".
type prefetchKey struct{}

// LimitRate bounds at n per source the items the nearest combining operator
// upstream of it (Merge, MergeDelayError, Zip, CombineLatest; on every path
// upstream, the first one met) pulls ahead of the downstream: Zip's and
// CombineLatest's queue per source holds n items instead of 32, and Merge's
// queue, shared by its sources, n times their number. Combining operators
// further upstream keep their default.
//
// There are no requests to split into batches: a push blocks until the
// downstream took the item, so a chain of synchronous operators never runs
// ahead of its subscriber and there is nothing to split. The upstream gets
// ahead only where a goroutine hands items over through a queue, so that is
// what LimitRate sizes. PublishOn and GroupBy take their queue sizes as
// arguments and ignore it; FlatMap and SwitchMap have no queue.
//
// n above 65536 counts as 65536: the queues are allocated whole at
// subscription. n < 1 gives ErrInvalidArgument. Costs one context value per subscription,
// nothing per item.
func (f Flux[T]) LimitRate(n int) Flux[T] {
	if n < 1 {
		return Error[T](invalid("LimitRate", "prefetch below 1"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		return f.run(context.WithValue(ctx, prefetchKey{}, n), emit)
	}}
}

// prefetchOf returns the queue size per source for a combining operator
// subscribed with ctx, and the context to subscribe its sources with: one in
// which a LimitRate downstream no longer applies, so that it bounds only the
// nearest combining operator.
func prefetchOf(ctx context.Context) (int, context.Context) {
	n, _ := ctx.Value(prefetchKey{}).(int)
	if n == 0 {
		return defaultPrefetch, ctx
	}
	return min(n, maxPrefetch), context.WithValue(ctx, prefetchKey{}, 0)
}
