package bench

import (
	"syscall"
	"time"
)

// blockThread blocks the calling thread in nanosleep(2), as a blocking
// system call or Java's LockSupport.parkNanos does: the goroutine keeps its
// thread, and the runtime hands the processor to other goroutines.
func blockThread(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
