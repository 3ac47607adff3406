package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/reactivex/rxgo/v2"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// rxgo in, rxgo out: deposits arrive as an rxgo Observable, each account's
// are applied in order, and the outcomes leave as an rxgo Observable.
func ExampleResults_rxgo() {
	var items []any
	for _, d := range deposits() {
		items = append(items, d)
	}
	in := rxgo.Just(items...)()

	results, err := dispatch.NewResults[deposit](64)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	balance := map[string]int{}
	d, err := dispatch.New("deposits", accounts, flux.FromObservable[deposit](in),
		func(_ context.Context, x deposit) error {
			mu.Lock()
			defer mu.Unlock()
			if x.amount > 30 && x.account.ID == "bob" {
				return errors.New("over the limit") // a business refusal: logged at Debug only
			}
			balance[x.account.ID] += x.amount
			return nil
		}, dispatch.WithResults(results))
	if err != nil {
		panic(err)
	}
	go func() { _ = d.Run(context.Background()) }()

	refused := results.Observable(context.Background()).Filter(func(v any) bool {
		return v.(dispatch.Result[deposit]).Outcome != dispatch.OutcomeSuccess
	}).Map(func(_ context.Context, v any) (any, error) {
		r := v.(dispatch.Result[deposit])
		return fmt.Sprintf("%s %d: %s (%v)", r.Exchange.account.ID, r.Exchange.amount, r.Outcome, r.Err), nil
	})
	for it := range refused.Observe() {
		fmt.Println(it.V)
	}
	<-d.Done()
	fmt.Println(balance["alice"], balance["bob"], balance["carol"])
	// Output:
	// bob 40: error (over the limit)
	// 100 60 100
}

// The outcome hook sees every exchange once after it ended, with its group:
// here it tallies the outcomes per account.
func ExampleWithOutcomeHook() {
	var mu sync.Mutex
	tally := map[string][]string{}
	hook := func(_ context.Context, r dispatch.Result[deposit]) {
		mu.Lock()
		defer mu.Unlock()
		tally[r.Exchange.account.ID] = append(tally[r.Exchange.account.ID], r.Outcome.String())
	}
	handler := func(ctx context.Context, x deposit) error {
		if _, ok := dispatch.GroupOf(ctx); !ok {
			return errors.New("no group")
		}
		if x.amount == 20 {
			return errors.New("refused")
		}
		return nil
	}
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits()), handler, dispatch.WithOutcomeHook(hook))
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background()); err != nil {
		panic(err)
	}
	names := make([]string, 0, len(tally))
	for name := range tally {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name, tally[name])
	}
	// Output:
	// alice [success error success success]
	// bob [success error success success]
	// carol [success error success success]
}
