package main

import (
	"context"
	"os"
	"sync"
	"time"
)

// stoppable is what await stops: a *dispatch.Dispatcher.
type stoppable interface {
	Done() <-chan struct{}
	StopGracefully(ctx context.Context) error
	ForceStop()
}

// await waits until d is done: the first signal starts a graceful stop, a
// second one a forced stop, unless it is of the first's kind and came
// within repeat of it. It returns the first signal (nil if none came) and
// whether the stop was forced. The graceful stop's goroutine has exited
// when it returns.
func await(d stoppable, interrupt <-chan os.Signal, repeat time.Duration) (first os.Signal, forced bool) {
	stopCtx, cancelStop := context.WithCancel(context.Background())
	var graceful sync.WaitGroup
	defer graceful.Wait()
	defer cancelStop()
	var firstAt time.Time
	for {
		select {
		case <-d.Done():
			return first, forced
		case sig := <-interrupt:
			switch {
			case first == nil:
				first, firstAt = sig, time.Now()
				graceful.Go(func() { _ = d.StopGracefully(stopCtx) })
			case forced, sig == first && time.Since(firstAt) < repeat:
			default:
				forced = true
				cancelStop()
				d.ForceStop()
			}
		}
	}
}
