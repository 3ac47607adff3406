package dispatch_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// payment holds its account as an aggregate.Key, made once per account.
type payment struct {
	account aggregate.Key
	cents   int
}

func (p payment) AggregateID() aggregate.ID   { return aggregate.NewID(accounts, p.account.ID()) }
func (p payment) AggregateKey() aggregate.Key { return p.account } // the same id

// With WithAggregateKey, an exchange that implements aggregate.KeyCapable
// beside IDCapable is routed by its key, hashed when the key was made: same
// groups, same order, no ID copied and no hashing per exchange.
func ExampleNew_aggregateKey() {
	alice, bob := aggregate.NewKey("alice"), aggregate.NewKey("bob")
	xs := []payment{{alice, 10}, {bob, 5}, {alice, -3}, {bob, 7}}
	var mu sync.Mutex
	seen := map[string][]string{} // each account's payments with their group, in handling order
	d, err := dispatch.New("payments", accounts, flux.FromSlice(xs),
		func(ctx context.Context, p payment) error {
			mu.Lock()
			defer mu.Unlock()
			g, _ := dispatch.GroupOf(ctx)
			seen[p.account.ID()] = append(seen[p.account.ID()], fmt.Sprintf("%d@%d", p.cents, g))
			return nil
		},
		dispatch.WithParallelism(8), dispatch.WithAggregateKey())
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(seen["alice"], seen["bob"], aggregate.GroupKey("alice", 8), aggregate.GroupKey("bob", 8))
	// Output:
	// [10@0 -3@0] [5@5 7@5] 0 5
}
