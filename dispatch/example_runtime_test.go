package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// ledger records, per account, the amounts in handling order.
type ledger struct {
	mu      sync.Mutex
	amounts map[string][]int
}

func (l *ledger) apply(_ context.Context, x deposit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.amounts == nil {
		l.amounts = map[string][]int{}
	}
	l.amounts[x.account.ID] = append(l.amounts[x.account.ID], x.amount)
	return nil
}

func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.amounts))
	for name := range l.amounts {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s%v", name, l.amounts[name])
	}
	return strings.Join(parts, " ")
}

// Run prepares and starts the components, and returns once their work
// ended by itself (finite sources); had ctx ended first, it would have
// stopped them within the shutdown timeout, then forced them.
func ExampleRuntime_Run() {
	var l ledger
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(deposits()), l.apply)
	if err != nil {
		panic(err)
	}
	rt, err := component.NewRuntime("app", []component.Component{d})
	if err != nil {
		panic(err)
	}
	fmt.Println(rt.Run(context.Background()))
	fmt.Println(l.String(), rt.State())
	// Output:
	// <nil>
	// alice[10 20 30 40] bob[10 20 30 40] carol[10 20 30 40] STOPPED
}

// A Runtime that owns a supplier its dispatchers borrow: both dispatchers
// get the one scheduler of the
// Account aggregate, and the supplier is stopped once, after both.
func ExampleWithOwned() {
	supplier, err := aggregate.NewSchedulerSupplier("EventDispatcher")
	if err != nil {
		panic(err)
	}
	var domain, projection ledger
	newDispatcher := func(name string, l *ledger) *dispatch.Dispatcher[deposit] {
		d, err := dispatch.New(name, accounts, flux.FromSlice(deposits()[:4]), l.apply,
			dispatch.WithSchedulerSupplier(supplier)) // lent
		if err != nil {
			panic(err)
		}
		return d
	}
	rt, err := component.NewRuntime("events",
		[]component.Component{newDispatcher("domain", &domain), newDispatcher("projection", &projection)},
		component.WithOwned(supplier))
	if err != nil {
		panic(err)
	}
	fmt.Println(rt.Run(context.Background()))
	fmt.Println(domain.String())
	fmt.Println(projection.String())
	_, err = supplier.GetOrInitialize(accounts)
	select {
	case <-supplier.Done():
		fmt.Println(errors.Is(err, aggregate.ErrStopped), "done")
	default:
		fmt.Println(errors.Is(err, aggregate.ErrStopped), "not done")
	}
	// Output:
	// <nil>
	// alice[10 20] bob[10] carol[10]
	// alice[10 20] bob[10] carol[10]
	// true done
}
