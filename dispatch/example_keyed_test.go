package dispatch_test

import (
	"context"
	"fmt"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// tick is an exchange already routed upstream: it carries its lane.
type tick struct {
	lane, seq int
}

// NewKeyed takes the group from the exchange itself (here a lane number
// computed upstream) instead of hashing an aggregate id; the key must be in
// [0, parallelism). Each group's exchanges are still handled one at a time,
// in order.
func ExampleNewKeyed() {
	var ticks []tick
	for seq := range 6 {
		ticks = append(ticks, tick{lane: seq % 3, seq: seq})
	}
	seen := make([][]int, 3) // one slice per lane, each touched by its lane only
	d, err := dispatch.NewKeyed("ticks", aggregate.MaterializedNamedAggregate{Context: "feed", Aggregate: "Lane"},
		flux.FromSlice(ticks), func(t tick) int { return t.lane },
		func(_ context.Context, t tick) error {
			seen[t.lane] = append(seen[t.lane], t.seq)
			return nil
		},
		dispatch.WithParallelism(3))
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(seen)
	// Output:
	// [[0 3] [1 4] [2 5]]
}

// GroupOf tells a handler which group it runs in, so that state kept per
// group lives in a slice indexed by it: the group's exchanges run one at a
// time, so its slot needs no lock.
func ExampleGroupOf() {
	const groups = 4
	handled := make([]int, groups)
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits()),
		func(ctx context.Context, x deposit) error {
			g, _ := dispatch.GroupOf(ctx)
			handled[g]++
			return nil
		},
		dispatch.WithParallelism(groups))
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background()); err != nil {
		panic(err)
	}
	total := 0
	for _, n := range handled {
		total += n
	}
	fmt.Println(total, "deposits in", groups, "groups")
	// Output:
	// 12 deposits in 4 groups
}
