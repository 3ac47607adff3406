package aggregate_test

import (
	"context"
	"fmt"

	"github.com/aggflow/aggflow/aggregate"
)

// An id always lands in the same group, its hash floor-modulo the group
// count; a truncating % would give order-1 the group -14 of 128.
func ExampleGroupKey() {
	for _, id := range []string{"order-1", "订单-1", "😀"} {
		fmt.Println(id, aggregate.HashCode(id), aggregate.GroupKey(id, 128))
	}
	sales := aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}
	fmt.Println(aggregate.NewID(sales, "order-1").Mod(128))
	// Output:
	// order-1 -1207111310 114
	// 订单-1 1085411543 87
	// 😀 1772899 99
	// 114
}

// A Key is its id hashed once: its group is the one GroupKey and ID.Mod give.
func ExampleNewKey() {
	k := aggregate.NewKey("order-1")
	sales := aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}
	fmt.Println(k.ID(), k.HashCode(), k.Mod(128), aggregate.NewID(sales, k.ID()).Mod(128))
	// Output:
	// order-1 -1207111310 114 114
}

func ExampleParseNamedAggregate() {
	for _, s := range []string{"sales.Order", "Order", "a.b.c"} {
		named, err := aggregate.ParseNamedAggregate(s, "crm")
		fmt.Println(named.Context, named.Aggregate, err)
	}
	_, err := aggregate.ParseNamedAggregate("Order", "")
	fmt.Println(err)
	// Output:
	// sales Order <nil>
	// crm Order <nil>
	// crm a.b.c <nil>
	// aggregate: invalid named aggregate: "Order" has no context part and the default context is empty
}

// One scheduler per named aggregate, with two goroutines; a graceful stop runs
// what was queued, then refuses new named aggregates.
func ExampleNewSchedulerSupplier() {
	supplier, err := aggregate.NewSchedulerSupplier("CommandDispatcher", aggregate.WithParallelism(2))
	if err != nil {
		panic(err)
	}
	orders, _ := supplier.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"})
	worker, _ := orders.NewWorker()
	for i := range 3 {
		_ = worker.Schedule(func(context.Context) { fmt.Println(orders.Name(), "task", i) })
	}

	fmt.Println(supplier.StopGracefully(context.Background()))
	_, err = supplier.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Invoice"})
	fmt.Println(err)
	// Output:
	// CommandDispatcher-Order task 0
	// CommandDispatcher-Order task 1
	// CommandDispatcher-Order task 2
	// <nil>
	// aggregate: scheduler supplier stopped: supplier "CommandDispatcher" cannot create a scheduler from state STOPPED
}

// The owner of a supplier lends it as a SchedulerSupplier, which has no
// stop: two borrowers share one scheduler per named aggregate, and only the
// owner stops the supplier, after them.
func ExampleSchedulerSupplier() {
	owner, err := aggregate.NewSchedulerSupplier("EventDispatcher")
	if err != nil {
		panic(err)
	}
	var events, states aggregate.SchedulerSupplier = owner, owner // lent
	order := aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}
	a, _ := events.GetOrInitialize(order)
	b, _ := states.GetOrInitialize(order)
	fmt.Println(a == b, a.Name())

	fmt.Println(owner.StopGracefully(context.Background()), a.IsDisposed())
	<-owner.Done()
	_, err = events.GetOrInitialize(order)
	fmt.Println(err)
	// Output:
	// true EventDispatcher-Order
	// <nil> true
	// aggregate: scheduler supplier stopped: supplier "EventDispatcher" cannot create a scheduler from state STOPPED
}
