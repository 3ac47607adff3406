package dispatch_test

import (
	"context"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// Quiesce then ForceStop while Prepare is still in the supplier (the doc's
// "graceful, then force"): the stops touch the contexts only once Prepare
// published them (-race checks it).
func TestQuiesceThenForceDuringPrepare(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	sup, err := aggregate.NewSchedulerSupplier("edge", aggregate.WithSchedulerFactory(func(name string, n int) (schedulers.Scheduler, error) {
		close(entered)
		<-release
		return schedulers.NewParallel(name, n)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { sup.ForceStop(); <-sup.Done() }()
	d, err := dispatch.New("edge", orders, flux.FromSlice(exchanges(5, 1)), testkit.Perform, quiet,
		dispatch.WithSchedulerSupplier(sup))
	if err != nil {
		t.Fatal(err)
	}
	prepared := make(chan error, 1)
	go func() { prepared <- d.Prepare(context.Background()) }()
	<-entered
	d.Quiesce()      // NEW -> STOPPING, Prepare still in the supplier
	go d.ForceStop() // from STOPPING: "Prepare completed", it has not
	close(release)   // Prepare now writes the contexts; -race needs no overlap in time

	<-prepared
	<-d.Done()
}
