package main

import (
	"os"
	"time"
)

// hold waits d, or until a value arrives on interrupt, and returns that
// value (nil when d passed first, or at once when d is not positive): the
// -metrics-hold wait, which keeps /metrics served after the summary.
func hold(d time.Duration, interrupt <-chan os.Signal) os.Signal {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case sig := <-interrupt:
		return sig
	}
}
