package dispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// A handler that blocks (here a 1 ms call to a store, stood for by a
// sleep) holds a goroutine while it waits: on the default pool, one
// goroutine per CPU, a few such handlers stall every group. A bounded
// elastic scheduler gives each running group a goroutine of its own, up to
// its cap, and lets the idle ones retire.
func ExampleNew_blockingHandler() {
	io, err := schedulers.NewBoundedElastic("bank-io", 64)
	if err != nil {
		panic(err)
	}
	store := func(ctx context.Context, x deposit) error {
		select {
		case <-time.After(time.Millisecond): // the store's round trip
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits()), store,
		dispatch.WithScheduler(io))
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
	<-d.Done()
	if err := io.DisposeGracefully(ctx); err != nil { // the caller owns the scheduler
		panic(err)
	}
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// {Received:12 Succeeded:12 Failed:0 Discarded:0 InFlight:0}
}
