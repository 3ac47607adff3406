package schedulers_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/schedulers"
)

// Blocking tasks (I/O, locks) want a goroutine each: a bounded elastic
// scheduler starts one per task up to its cap, so four tasks that each wait
// for the other three all run at once. On NewParallel("io", 2) the third
// would wait for a goroutine that never comes free.
func ExampleNewBoundedElastic() {
	s, err := schedulers.NewBoundedElastic("io", 16)
	if err != nil {
		panic(err)
	}
	var arrived sync.WaitGroup
	arrived.Add(4)
	var done atomic.Int32
	for range 4 {
		_ = s.Schedule(func(context.Context) {
			arrived.Done()
			arrived.Wait() // a blocking call: returns once all four run
			done.Add(1)
		})
	}
	if err := s.DisposeGracefully(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(done.Load(), "tasks ran side by side")
	// Output:
	// 4 tasks ran side by side
}

// A single scheduler runs every task on one goroutine, whichever worker
// queued it: tasks never overlap, so they may share state without a lock.
func ExampleNewSingle() {
	s, err := schedulers.NewSingle("ledger")
	if err != nil {
		panic(err)
	}
	balance := 0 // touched by the scheduler's one goroutine only
	for range 2 {
		w, err := s.NewWorker()
		if err != nil {
			panic(err)
		}
		for range 100 {
			_ = w.Schedule(func(context.Context) { balance++ })
		}
	}
	if err := s.DisposeGracefully(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(balance)
	// Output:
	// 200
}
