package schedulers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/schedulers"
)

// Two workers share a scheduler of two goroutines: each worker runs its own
// tasks one at a time, in order, while the workers run side by side.
func ExampleNewParallel() {
	s, err := schedulers.NewParallel("orders", 2)
	if err != nil {
		panic(err)
	}
	var logs [2][]string // each written only by its own worker's tasks
	for i := range logs {
		w, err := s.NewWorker()
		if err != nil {
			panic(err)
		}
		for step := range 3 {
			_ = w.Schedule(func(context.Context) {
				logs[i] = append(logs[i], fmt.Sprintf("order-%d/step-%d", i, step))
			})
		}
	}
	// Run what is queued, then release the goroutines.
	if err := s.DisposeGracefully(context.Background()); err != nil {
		panic(err)
	}
	for _, log := range logs {
		fmt.Println(strings.Join(log, " "))
	}
	fmt.Println(errors.Is(s.Schedule(func(context.Context) {}), schedulers.ErrRejected))
	// Output:
	// order-0/step-0 order-0/step-1 order-0/step-2
	// order-1/step-0 order-1/step-1 order-1/step-2
	// true
}

// A graceful stop gets a deadline; when it passes, Dispose cuts the drain
// short: queued tasks are dropped (and reported), running ones see their
// context cancelled.
func ExampleScheduler_DisposeGracefully() {
	var dropped atomic.Int32
	s, err := schedulers.NewSingle("billing",
		schedulers.WithDiscardHook(func(schedulers.Task) { dropped.Add(1) }))
	if err != nil {
		panic(err)
	}
	cause := make(chan error, 1)
	_ = s.Schedule(func(ctx context.Context) {
		<-ctx.Done() // a task that only ends when told to
		cause <- context.Cause(ctx)
	})
	for range 3 {
		_ = s.Schedule(func(context.Context) {})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.DisposeGracefully(ctx); errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("drain timed out; forcing")
		s.Dispose()
	}
	<-s.Done()
	fmt.Println("cause:", <-cause)
	fmt.Println("dropped:", dropped.Load())
	// Output:
	// drain timed out; forcing
	// cause: schedulers: disposed
	// dropped: 3
}

// Immediate runs the task before Schedule returns, on the caller's goroutine.
func ExampleImmediate() {
	s := schedulers.Immediate()
	_ = s.Schedule(func(context.Context) { fmt.Println("ran inline") })
	fmt.Println("after Schedule")
	// Output:
	// ran inline
	// after Schedule
}
