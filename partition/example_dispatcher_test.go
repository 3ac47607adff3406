package partition_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// A broker binding owns partitions through a Dispatcher: each assigned
// partition gets an intake, every delivery carries its position, and a
// revoke drains the partition and returns the finished prefix, the position
// the binding then acknowledges (commits).
func ExampleNewDispatcher() {
	sched, err := schedulers.NewParallel("orders", 2)
	if err != nil {
		panic(err)
	}
	orders := aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Order"}
	idOf := func(event string) string { id, _, _ := strings.Cut(event, ":"); return id }
	d, err := partition.NewDispatcher("orders", orders, sched, idOf,
		func(_ context.Context, x partition.Delivery[string]) error {
			return nil // apply x.Exchange to its order; x.Position orders it within the partition
		})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	in, err := d.Assign(ctx, 0, 100) // partition 0, committed up to 99
	if err != nil {
		panic(err)
	}
	for i, event := range []string{"o-1:placed", "o-2:placed", "o-1:paid"} {
		if err := in.Deliver(ctx, event, int64(100+i), 1); err != nil {
			panic(err)
		}
	}
	settled, err := d.Revoke(ctx, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("commit up to", settled.Prefix, settled.OK, settled.Stats == dispatch.Stats{Received: 3, Succeeded: 3})
	if err := sched.DisposeGracefully(ctx); err != nil {
		panic(err)
	}
	// Output:
	// commit up to 102 true true
}

// A binding that fetches records a batch at a time delivers the batch at
// once: each group gets its share in one hand-off.
func ExampleIntake_DeliverBatch() {
	sched, err := schedulers.NewParallel("orders", 2)
	if err != nil {
		panic(err)
	}
	orders := aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Order"}
	idOf := func(event string) string { id, _, _ := strings.Cut(event, ":"); return id }
	d, err := partition.NewDispatcher("orders", orders, sched, idOf,
		func(_ context.Context, x partition.Delivery[string]) error { return nil })
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	in, err := d.Assign(ctx, 0, 100)
	if err != nil {
		panic(err)
	}
	var fetched []partition.Record[string]
	for i, event := range []string{"o-1:placed", "o-2:placed", "o-1:paid"} {
		fetched = append(fetched, partition.Record[string]{Exchange: event, Position: int64(100 + i), Attempt: 1})
	}
	n, err := in.DeliverBatch(ctx, fetched)
	fmt.Println("delivered", n, err)
	settled, err := d.Revoke(ctx, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("commit up to", settled.Prefix, settled.OK)
	if err := sched.DisposeGracefully(ctx); err != nil {
		panic(err)
	}
	// Output:
	// delivered 3 <nil>
	// commit up to 102 true
}
