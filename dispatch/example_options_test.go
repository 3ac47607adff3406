package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// order is an exchange of another aggregate type than deposit's.
type order struct {
	id   aggregate.ID
	item string
}

func (o order) AggregateID() aggregate.ID { return o.id }

// One source carries the exchanges of two aggregate types; each type's
// exchanges run on its own scheduler from the supplier, which the
// MainDispatcher borrows. An exchange of a type it was not given is
// discarded with ErrUnknownAggregate.
func ExampleNewMain() {
	orders := aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Order"}
	carts := aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Cart"}
	refunds := aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Refund"}
	supplier, err := aggregate.NewSchedulerSupplier("shop")
	if err != nil {
		panic(err)
	}
	defer supplier.ForceStop() // its owner stops it, after the dispatcher
	source := flux.Just(
		order{aggregate.NewID(orders, "o-1"), "book"},
		order{aggregate.NewID(carts, "c-1"), "pen"},
		order{aggregate.NewID(refunds, "r-1"), "lamp"},
		order{aggregate.NewID(orders, "o-1"), "ink"},
	)
	var mu sync.Mutex
	seen := map[string][]string{}
	m, err := dispatch.NewMain("shop", []aggregate.NamedAggregate{orders, carts}, source,
		func(_ context.Context, o order) error {
			mu.Lock()
			defer mu.Unlock()
			seen[o.id.Named.AggregateName()] = append(seen[o.id.Named.AggregateName()], o.item)
			return nil
		}, supplier,
		dispatch.WithDiscardHook(func(o order, reason error) {
			fmt.Println("discarded", o.item, errors.Is(reason, dispatch.ErrUnknownAggregate))
		}))
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Run(context.Background()))
	fmt.Println(seen["Order"], seen["Cart"])
	fmt.Printf("%+v\n", m.Stats())
	// Output:
	// discarded lamp true
	// <nil>
	// [book ink] [pen]
	// {Received:4 Succeeded:3 Failed:0 Discarded:1 InFlight:0}
}

// Under StopOnError the first failure stops the intake: what was admitted
// still drains, and the failure is the dispatcher's Err.
// Under Continue (the default) a failure is only that exchange's outcome.
func ExampleWithErrorPolicy() {
	refused := errors.New("insufficient funds")
	release := make(chan struct{})
	var once sync.Once
	source := flux.Create(func(ctx context.Context, sink flux.Sink[deposit]) error {
		for i := 0; ; i++ { // endless: only the stop ends it
			if err := sink.Next(deposit{aggregate.NewID(accounts, "alice"), i}); err != nil {
				return err
			}
			if i == 2 {
				<-release // wait until the failure stopped the intake
			}
		}
	})
	d, err := dispatch.New("deposits", accounts, source,
		func(_ context.Context, x deposit) error {
			if x.amount == 1 {
				defer once.Do(func() { close(release) })
				return refused
			}
			return nil
		},
		dispatch.WithErrorPolicy(dispatch.StopOnError),
		dispatch.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	err = d.Run(context.Background())
	fmt.Println(errors.Is(err, refused), d.State())
	s := d.Stats()
	fmt.Println(s.Failed, s.Succeeded+s.Discarded+s.Failed == s.Received)
	// Output:
	// true STOPPED
	// 1 true
}

// The discard hook sees every exchange dropped without being handled, with
// the reason: here the ones a ForceStop finds queued behind a blocked
// handler.
func ExampleWithDiscardHook() {
	started, emitted := make(chan struct{}), make(chan struct{})
	source := flux.Create(func(ctx context.Context, sink flux.Sink[deposit]) error {
		defer close(emitted)
		for _, x := range deposits()[:3] {
			if err := sink.Next(x); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	var dropped []int
	d, err := dispatch.New("deposits", accounts, source,
		func(ctx context.Context, x deposit) error {
			close(started)
			<-ctx.Done() // blocked until the force cancels it
			return nil
		},
		dispatch.WithParallelism(1), // one group: the other two queue behind it
		dispatch.WithDiscardHook(func(x deposit, reason error) {
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(reason, dispatch.ErrForceStopped) {
				dropped = append(dropped, x.amount)
			}
		}))
	if err != nil {
		panic(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		panic(err)
	}
	if err := d.Start(); err != nil {
		panic(err)
	}
	<-started
	<-emitted // all three admitted: one runs, two are queued
	d.ForceStop()
	<-d.Done()
	fmt.Println(len(dropped), d.Stats().Discarded)
	// Output:
	// 2 2
}

// With a nil source a dispatcher is fed by Emit, on the caller's goroutine
// with no hop; Emit waits while the pending budget is used up.
func ExampleDispatcher_Emit() {
	var l ledger
	d, err := dispatch.New[deposit]("deposits", accounts, nil, l.apply, dispatch.WithMaxPending(2))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := d.Prepare(ctx); err != nil {
		panic(err)
	}
	if err := d.Start(); err != nil {
		panic(err)
	}
	for _, x := range deposits()[:6] {
		if err := d.Emit(ctx, x); err != nil {
			panic(err)
		}
	}
	fmt.Println(d.StopGracefully(ctx))
	fmt.Println(l.String())
	// Output:
	// <nil>
	// alice[10 20] bob[10 20] carol[10 20]
}
