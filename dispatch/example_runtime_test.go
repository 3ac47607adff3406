package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// job is a tiny Component of these examples: Prepare takes the scheduler of
// the Order aggregate from the supplier it borrows, Start runs its steps on
// one worker of it, in order, and the job is done once they ran (finite
// work) or once it is force-stopped.
type job struct {
	name     string
	supplier aggregate.SchedulerSupplier
	steps    int

	worker    schedulers.Worker
	mu        sync.Mutex
	ran       []string
	done      chan struct{}
	closeDone sync.Once
}

func newJob(name string, supplier aggregate.SchedulerSupplier, steps int) *job {
	return &job{name: name, supplier: supplier, steps: steps, done: make(chan struct{})}
}

func (j *job) Name() string { return j.name }

func (j *job) Prepare(context.Context) error {
	sch, err := j.supplier.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"})
	if err == nil {
		j.worker, err = sch.NewWorker()
	}
	return err
}

func (j *job) Start() error {
	for i := range j.steps {
		err := j.worker.Schedule(func(context.Context) {
			j.mu.Lock()
			j.ran = append(j.ran, fmt.Sprintf("%s-%d", j.name, i))
			j.mu.Unlock()
			if i == j.steps-1 {
				j.end()
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (j *job) Quiesce() {} // it takes no new work anyway

func (j *job) StopGracefully(ctx context.Context) error {
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *job) ForceStop() {
	if j.worker != nil {
		j.worker.Dispose()
	}
	j.end()
}

func (j *job) end()                  { j.closeDone.Do(func() { close(j.done) }) }
func (j *job) Done() <-chan struct{} { return j.done }
func (j *job) Err() error            { return nil }

// Run prepares and starts the components, and returns once their work
// ended by itself; had ctx ended first, it would have stopped them within
// the shutdown timeout.
func ExampleRuntime_Run() {
	supplier, err := aggregate.NewSchedulerSupplier("jobs", aggregate.WithParallelism(1))
	if err != nil {
		panic(err)
	}
	defer supplier.ForceStop() // the supplier's owner stops it; here, after the Runtime
	report := newJob("report", supplier, 3)
	rt, err := dispatch.NewRuntime("app", []dispatch.Component{report})
	if err != nil {
		panic(err)
	}
	fmt.Println(rt.Run(context.Background()))
	fmt.Println(report.ran, rt.State())
	// Output:
	// <nil>
	// [report-0 report-1 report-2] STOPPED
}

// A Runtime that owns a supplier its components borrow, as Wow's
// CompositeEventDispatcher: both jobs get the one scheduler of Order, and
// the supplier is stopped once, after both.
func ExampleWithOwned() {
	supplier, err := aggregate.NewSchedulerSupplier("EventDispatcher", aggregate.WithParallelism(1))
	if err != nil {
		panic(err)
	}
	domain, state := newJob("domain", supplier, 2), newJob("state", supplier, 2)
	rt, err := dispatch.NewRuntime("events", []dispatch.Component{domain, state}, dispatch.WithOwned(supplier))
	if err != nil {
		panic(err)
	}
	fmt.Println(rt.Run(context.Background()))
	<-rt.Done()
	fmt.Println(domain.ran, state.ran)
	_, err = supplier.GetOrInitialize(aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"})
	fmt.Println(errors.Is(err, aggregate.ErrStopped), isClosed(supplier.Done()))
	// Output:
	// <nil>
	// [domain-0 domain-1] [state-0 state-1]
	// true true
}
