//go:build unix

package benchcost

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system time so far, -1 if unknown.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
