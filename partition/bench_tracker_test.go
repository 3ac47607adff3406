package partition_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/partition"
)

// window is how many positions are in flight in the out-of-order benchmarks:
// about a dispatcher's pending budget.
const window = 1024

// gapped returns n positions from 0 with gaps of 1 to 8 (a filtered JetStream
// consumer, Kafka transaction markers), or without gaps.
func gapped(n int, gaps bool) []int64 {
	r := rand.New(rand.NewPCG(1, 2))
	ps := make([]int64, n)
	pos := int64(0)
	for i := range ps {
		ps[i] = pos
		pos++
		if gaps {
			pos += r.Int64N(8)
		}
	}
	return ps
}

// benchPositions runs op once per benchmark op, with dense positions and with
// gaps; i indexes ps and wraps around through a Reset (timed too, once per
// 65536 positions).
func benchPositions(b *testing.B, op func(tr *partition.Tracker, ps []int64, i int)) {
	for _, gaps := range []bool{false, true} {
		b.Run(map[bool]string{false: "dense", true: "gaps"}[gaps], func(b *testing.B) {
			ps := gapped(1<<16, gaps)
			var tr partition.Tracker
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(ps) {
					tr.Reset(0)
					i = 0
				}
				op(&tr, ps, i)
				i++
			}
		})
	}
}

// One op is one position tracked and finished, each Finish right after its
// Track: the prefix moves every time and the ring holds one entry.
func BenchmarkTrackFinishInOrder(b *testing.B) {
	benchPositions(b, func(tr *partition.Tracker, ps []int64, i int) {
		_ = tr.Track(ps[i])
		_ = tr.Finish(ps[i])
	})
}

// One op is one position tracked and one position of the previous block of
// 1024 finished, in a random order: 1024 to 2048 positions are held and the
// prefix moves in jumps.
func BenchmarkTrackFinishOutOfOrder(b *testing.B) {
	perm := rand.New(rand.NewPCG(3, 4)).Perm(window)
	benchPositions(b, func(tr *partition.Tracker, ps []int64, i int) {
		_ = tr.Track(ps[i])
		if block := i - i%window; block >= window {
			_ = tr.Finish(ps[block-window+perm[i%window]])
		}
	})
}

// One op is one position tracked on the benchmark's goroutine and finished
// on one of several others, which claim positions by an atomic counter (so
// they finish slightly out of order) and contend with the tracking goroutine
// for the tracker's mutex; at most 1024 positions are in flight. work is a
// handler's time before each Finish (0: the tracker is all there is, the worst
// case for contention). "harness" is the same without the tracker: the cost of
// the claiming, the hand-off and the work.
func BenchmarkTrackWhileFinishing(b *testing.B) {
	for _, work := range []time.Duration{0, 500 * time.Nanosecond} {
		for _, finishers := range []int{1, 2, 4} {
			name := fmt.Sprintf("work=%v/finishers=%d", work, finishers)
			b.Run(name, func(b *testing.B) { trackWhileFinishing(b, work, finishers, false) })
			b.Run(name+"/harness", func(b *testing.B) { trackWhileFinishing(b, work, finishers, true) })
		}
	}
}

func trackWhileFinishing(b *testing.B, work time.Duration, finishers int, harness bool) {
	var tr partition.Tracker
	track, finish := tr.Track, tr.Finish
	if harness {
		track = func(int64) error { return nil }
		finish = track
	}
	var tracked, claimed, finished atomic.Int64
	n := int64(b.N)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range finishers {
		wg.Go(func() {
			for p := claimed.Add(1) - 1; p < n; p = claimed.Add(1) - 1 {
				for p >= tracked.Load() {
					runtime.Gosched()
				}
				spin(work)
				_ = finish(p)
				finished.Add(1)
			}
		})
	}
	for i := range n {
		for i-finished.Load() >= window {
			runtime.Gosched()
		}
		_ = track(i)
		tracked.Store(i + 1)
	}
	wg.Wait()
}

// spin busies the CPU for d: a handler's work.
func spin(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
	}
}

// Baselines: a bare lock and unlock, twice, the floor of a tracker taking a
// mutex in Track and in Finish; and the out-of-order window of 1024 positions
// kept in a Go map instead of the tracker's index (one insert, one lookup and
// one delete per position).
func BenchmarkBaselines(b *testing.B) {
	b.Run("two-mutex-pairs", func(b *testing.B) {
		var mu sync.Mutex
		n := 0
		for b.Loop() {
			mu.Lock()
			n++
			mu.Unlock()
			mu.Lock()
			n++
			mu.Unlock()
		}
		_ = n
	})
	b.Run("map-window", func(b *testing.B) {
		m := make(map[int64]uint64)
		b.ReportAllocs()
		i, hits := int64(0), uint64(0)
		for b.Loop() {
			m[i] = uint64(i)
			hits += m[i-window/2]
			if i >= window {
				delete(m, i-window)
			}
			i++
		}
		_ = hits
	})
}
