//go:build !linux

package bench

import "time"

// blockThread falls back to time.Sleep where nanosleep(2) is not at hand.
func blockThread(d time.Duration) { time.Sleep(d) }
