package flux_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/aggflow/aggflow/flux"
)

// A Mono of one value, mapped, zipped with another and blocked on.
func ExampleMono() {
	price := flux.MonoFromFunc(func() (int, error) { return 120, nil })
	rate := flux.MonoJust(3)
	total := flux.MonoZip(price, rate, func(p, r int) int { return p * r })
	label := flux.MonoMap(total, func(t int) string { return fmt.Sprintf("total %d", t) })
	v, ok, err := label.Block(context.Background())
	fmt.Println(v, ok, err)
	// Output: total 360 true <nil>
}

// The Flux operators that reduce to one value return a Mono.
func ExampleFlux_Next() {
	ctx := context.Background()
	f := flux.Range(1, 5)
	first, _, _ := f.Next().Block(ctx)
	last, _, _ := f.Last().Block(ctx)
	third, _, _ := f.ElementAt(2).Block(ctx)
	n, _, _ := f.Count().Block(ctx)
	_, _, err := f.Single().Block(ctx)
	fmt.Println(first, last, third, n, err)
	// Output: 1 5 3 5 flux: Single: more than one item: flux: more than one element
}

// Grouping by customer id, each customer's orders in order.
func ExampleGroupByKey() {
	type order struct {
		customer string
		n        int
	}
	orders := flux.Just(order{"ann", 1}, order{"bob", 2}, order{"ann", 3}, order{"cid", 4}, order{"bob", 5})
	perCustomer := flux.ConcatMap(flux.GroupByKey(orders, func(o order) string { return o.customer }, 100),
		func(g flux.KeyedFlux[string, order]) flux.Flux[string] {
			return flux.Map(flux.CollectList(g.Flux).Flux(), func(os []order) string {
				return fmt.Sprint(g.Key, ":", len(os))
			})
		})
	got, err := flux.Collect(context.Background(), perCustomer)
	fmt.Println(got, err)
	// Output: [ann:2 bob:2 cid:1] <nil>
}

// Inner work at once, results in source order.
func ExampleFlatMapSequential() {
	lookups := flux.FlatMapSequential(flux.Just("a", "b", "c"), func(s string) flux.Flux[string] {
		return flux.MonoFromFunc(func() (string, error) { return strings.ToUpper(s), nil }).Flux()
	}, 3, 1)
	got, err := flux.Collect(context.Background(), lookups)
	fmt.Println(got, err)
	// Output: [A B C] <nil>
}

func ExampleMergeSequential() {
	got, err := flux.Collect(context.Background(), flux.MergeSequential(flux.Just(1, 2), flux.Just(3), flux.Just(4, 5)))
	fmt.Println(got, err)
	// Output: [1 2 3 4 5] <nil>
}

func ExampleThen() {
	saved := flux.Then(flux.Just("row 1", "row 2"), flux.MonoJust("saved"))
	v, _, err := saved.Block(context.Background())
	fmt.Println(v, err)
	// Output: saved <nil>
}

func ExampleCollectSorted() {
	ctx := context.Background()
	words := flux.Just("pear", "fig", "apple", "kiwi")
	sorted, _, _ := flux.CollectSorted(words, strings.Compare).Block(ctx)
	byLen, _, _ := flux.CollectMultimap(words, func(w string) int { return len(w) }, strings.ToUpper).Block(ctx)
	early, _, _ := words.Any(func(w string) bool { return cmp.Compare(w, "b") < 0 }).Block(ctx)
	fmt.Println(sorted, byLen, early)
	// Output: [apple fig kiwi pear] map[3:[FIG] 4:[PEAR KIWI] 5:[APPLE]] true
}
