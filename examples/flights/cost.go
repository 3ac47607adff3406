package main

import "time"

// burn keeps the calling goroutine busy for about d: the -handler-cost
// simulation of CPU-bound work. It spins rather than sleeps so that the cost
// occupies a scheduler goroutine and a CPU, as real work would.
func burn(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}
