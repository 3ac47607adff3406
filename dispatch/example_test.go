package dispatch_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

var accounts = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}

// deposit is an exchange: it is addressed to one account.
type deposit struct {
	account aggregate.ID
	amount  int
}

func (d deposit) AggregateID() aggregate.ID { return d.account }

func deposits() []deposit {
	var ds []deposit
	for i := 1; i <= 4; i++ {
		for _, name := range []string{"alice", "bob", "carol"} {
			ds = append(ds, deposit{aggregate.NewID(accounts, name), i * 10})
		}
	}
	return ds
}

// A dispatcher whose scheduler comes from a supplier: each account's
// deposits are handled one at a time, in order, while accounts run
// concurrently.
func ExampleDispatcher() {
	supplier, err := aggregate.NewSchedulerSupplier("bank")
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	history := map[string][]int{} // per account, in handling order
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits()),
		func(ctx context.Context, x deposit) error {
			mu.Lock()
			defer mu.Unlock()
			history[x.account.ID] = append(history[x.account.ID], x.amount)
			return nil
		},
		dispatch.WithSchedulerSupplier(supplier), dispatch.WithParallelism(8))
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
	<-d.Done() // the source completed and everything was handled
	if err := supplier.StopGracefully(ctx); err != nil {
		panic(err)
	}
	names := make([]string, 0, len(history))
	for name := range history {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name, history[name])
	}
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// alice [10 20 30 40]
	// bob [10 20 30 40]
	// carol [10 20 30 40]
	// {Received:12 Succeeded:12 Failed:0 Discarded:0 InFlight:0}
}

// A Runtime stops its components under one deadline: here a handler ignores
// the graceful stop, so once the deadline passes the runtime forces the
// dispatcher, whose handler context is then cancelled.
func ExampleRuntime() {
	started := make(chan struct{})
	d, err := dispatch.New("slow", accounts, flux.FromSlice(deposits()[:1]),
		func(ctx context.Context, x deposit) error {
			close(started)
			<-ctx.Done() // only a force ends this handler
			return ctx.Err()
		})
	if err != nil {
		panic(err)
	}
	rt, err := component.NewRuntime("app", []component.Component{d}, component.WithShutdownTimeout(50*time.Millisecond))
	if err != nil {
		panic(err)
	}
	if err := rt.Prepare(context.Background()); err != nil {
		panic(err)
	}
	if err := rt.Start(); err != nil {
		panic(err)
	}
	<-started
	err = rt.StopGracefully(context.Background())
	fmt.Println(err)
	<-d.Done()
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// component: shutdown timed out: runtime "app" after 50ms; still running: "slow"
	// {Received:1 Succeeded:0 Failed:1 Discarded:0 InFlight:0}
}

// A handler feeds follow-ups back through a Mailbox: a countdown per
// account that never blocks on its own dispatcher.
func ExampleMailbox() {
	box := dispatch.NewMailbox[deposit]()
	var mu sync.Mutex
	left := 3 // countdowns still running
	handler := func(ctx context.Context, x deposit) error {
		if x.amount > 0 {
			return box.Push(deposit{x.account, x.amount - 1})
		}
		mu.Lock()
		defer mu.Unlock()
		if left--; left == 0 {
			box.Close() // the last countdown ended: the source completes
		}
		return nil
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		_ = box.Push(deposit{aggregate.NewID(accounts, name), 1000})
	}
	d, err := dispatch.New("countdown", accounts, box.Flux(), handler)
	if err != nil {
		panic(err)
	}
	_ = d.Prepare(context.Background())
	_ = d.Start()
	<-d.Done()
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// {Received:3003 Succeeded:3003 Failed:0 Discarded:0 InFlight:0}
}
