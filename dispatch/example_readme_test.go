package dispatch_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// Example_quickStart is the README's quick start (deposit is declared in
// example_test.go): deposits to two accounts,
// each account's deposits applied one at a time in order, the accounts in
// parallel; Run returns once the source completed and every deposit was
// handled (an endless source is stopped by cancelling ctx: Run then drains
// within WithStopTimeout, then forces).
func Example_quickStart() {
	accounts := aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}
	alice, bob := aggregate.NewID(accounts, "alice"), aggregate.NewID(accounts, "bob")
	deposits := []deposit{{alice, 10}, {bob, 5}, {alice, -3}, {bob, 7}, {alice, 1}}

	var mu sync.Mutex
	balances := map[string][]int{} // each account's balance after each deposit
	apply := func(_ context.Context, d deposit) error {
		mu.Lock()
		defer mu.Unlock()
		history := balances[d.account.ID]
		last := 0
		if len(history) > 0 {
			last = history[len(history)-1]
		}
		balances[d.account.ID] = append(history, last+d.amount)
		return nil
	}

	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits), apply)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("alice", balances["alice"])
	fmt.Println("bob", balances["bob"])
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// alice [10 7 8]
	// bob [5 12]
	// {Received:5 Succeeded:5 Failed:0 Discarded:0 InFlight:0}
}
