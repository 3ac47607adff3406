// Package benchcost measures what a benchmark's records cost (wall and CPU
// time, allocations, rate), so that a broker binding's benchmark and its
// bare client loop's, run side by side, report figures to compare as
// ratios.
package benchcost

import (
	"runtime"
	"testing"
	"time"
)

// Meter is a measurement begun by Start.
type Meter struct {
	cpu     time.Duration
	mallocs uint64
}

// Start resets b's timer and begins measuring. It reads the heap statistics
// (a stop of the world): call it once, outside the loop.
func Start(b *testing.B) Meter {
	b.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	return Meter{cpu: cpuTime(), mallocs: ms.Mallocs}
}

// Stop stops b's timer and reports per record of b.N: ns/record (wall),
// cpu-ns/record (the process's user and system time, every goroutine's: an
// in-process broker's too; not reported where the platform does not tell),
// allocs/record (heap allocations, every goroutine's) and records/s.
func (m Meter) Stop(b *testing.B) {
	b.Helper()
	b.StopTimer()
	cpu := cpuTime()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	if cpu >= 0 && m.cpu >= 0 {
		b.ReportMetric(float64((cpu-m.cpu).Nanoseconds())/n, "cpu-ns/record")
	}
	b.ReportMetric(float64(ms.Mallocs-m.mallocs)/n, "allocs/record")
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
}

// Spin keeps its goroutine busy for d: a handler's CPU work, where a sleep's
// timer would cost more than the microseconds it stands for.
func Spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}
