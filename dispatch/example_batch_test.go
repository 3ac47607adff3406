package dispatch_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/dispatch"
)

// A source that fetches its exchanges a batch at a time, as a broker
// client does, hands each batch over at once: each account's deposits are
// still handled one at a time, in order.
func ExampleBatchSource() {
	all := deposits()
	source := dispatch.BatchSource(func(ctx context.Context, emit func([]deposit) error) error {
		for len(all) > 0 { // fetched five at a time
			batch := all[:min(5, len(all))]
			all = all[len(batch):]
			if err := emit(batch); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	history := map[string][]int{}
	d, err := dispatch.New("deposits", accounts, source, func(ctx context.Context, x deposit) error {
		mu.Lock()
		defer mu.Unlock()
		history[x.account.ID] = append(history[x.account.ID], x.amount)
		return nil
	})
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(history["alice"], history["bob"], history["carol"])
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// [10 20 30 40] [10 20 30 40] [10 20 30 40]
	// {Received:12 Succeeded:12 Failed:0 Discarded:0 InFlight:0}
}

// A producer that pushes a fetched batch at once hands each group its
// share in one go; EmitBatch returns how many of the batch it took.
func ExampleDispatcher_EmitBatch() {
	var mu sync.Mutex
	history := map[string][]int{}
	d, err := dispatch.New[deposit]("deposits", accounts, nil, func(ctx context.Context, x deposit) error {
		mu.Lock()
		defer mu.Unlock()
		history[x.account.ID] = append(history[x.account.ID], x.amount)
		return nil
	})
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
	n, err := d.EmitBatch(ctx, deposits())
	fmt.Println(n, err)
	if err := d.StopGracefully(ctx); err != nil {
		panic(err)
	}
	fmt.Println(history["alice"], history["bob"], history["carol"])
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// 12 <nil>
	// [10 20 30 40] [10 20 30 40] [10 20 30 40]
	// {Received:12 Succeeded:12 Failed:0 Discarded:0 InFlight:0}
}
