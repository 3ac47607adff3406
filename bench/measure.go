package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is one measured run, the line a child process prints.
type Result struct {
	Impl string `json:"impl"`
	Cell
	N   int `json:"n"`
	Rep int `json:"rep"`

	NsPerEx     float64 `json:"ns_per_ex"`
	AllocsPerEx float64 `json:"allocs_per_ex"` // -1: not measured (Reactor)
	Goroutines  int     `json:"goroutines"`    // peak; -1: not measured (Reactor)
	RSSKB       int64   `json:"peak_rss_kb"`   // the process's VmHWM; 0: unknown
	Handled     int64   `json:"handled"`

	// Latency runs only.
	Load    float64  `json:"load,omitempty"` // fraction of aggflow's saturation rate
	Rate    float64  `json:"rate,omitempty"` // offered exchanges per second
	Latency *Latency `json:"latency,omitempty"`

	// Reactor only: the warm-up passes before the timed ones, the timed
	// passes' (max - min) / median, and whether the warm-up reached its cap
	// before two consecutive passes agreed.
	Warmups   int     `json:"warmups,omitempty"`
	Spread    float64 `json:"spread,omitempty"`
	Unsettled bool    `json:"unsettled,omitempty"`

	Err string `json:"err,omitempty"`
}

// Measure runs the first n exchanges of w through impl once and measures
// it: wall time from the start of the run (the implementation's set-up
// included, as ReactorBench times its whole pipeline) to the last exchange
// handled and the last goroutine exited, heap allocations
// (runtime.MemStats.Mallocs), the peak number of goroutines sampled every
// millisecond (the sampler excluded), and, for a paced run, the waits. A
// failed check is reported in Result.Err.
func Measure(impl Impl, c Cell, w *Workload, n int, o RunOptions) Result {
	res := Result{Impl: impl.Name, Cell: c, N: n, Rate: o.Rate}
	r := NewRun(c, w, n, o)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := SampleGoroutines()
	r.base = time.Now()
	handled, err := impl.Run(r)
	elapsed := time.Since(r.base)
	res.Goroutines = s.Stop()
	runtime.ReadMemStats(&after)
	res.Handled = handled
	res.NsPerEx = float64(elapsed.Nanoseconds()) / float64(n)
	res.AllocsPerEx = float64(after.Mallocs-before.Mallocs) / float64(n)
	if err == nil {
		err = r.Verify(handled)
	}
	if err != nil {
		res.Err = err.Error()
	}
	if r.waits != nil && err == nil {
		l := r.latency()
		res.Latency = &l
	}
	return res
}

// Sampler tracks the peak number of goroutines.
type Sampler struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	peak  int
}

// SampleGoroutines samples runtime.NumGoroutine every millisecond until
// Stop, which returns the peak seen, less the sampler itself.
func SampleGoroutines() *Sampler {
	s := &Sampler{stopc: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			s.peak = max(s.peak, runtime.NumGoroutine())
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// Stop ends the sampling and returns the peak.
func (s *Sampler) Stop() int {
	close(s.stopc)
	s.wg.Wait()
	return s.peak - 1
}

// PeakRSSKB returns this process's peak resident set (VmHWM), in KiB, or 0
// where /proc/self/status does not say.
func PeakRSSKB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
