package job

import (
	"context"
	"time"
)

// Burn keeps the calling goroutine busy for about d, or until ctx is done
// (a forced stop): the -handler-cost simulation of CPU-bound work. It spins
// rather than sleeps so that the cost occupies a scheduler goroutine and a
// CPU, as real work would.
func Burn(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	done := ctx.Done()
	for start := time.Now(); time.Since(start) < d; {
		select {
		case <-done:
			return
		default:
		}
	}
}
