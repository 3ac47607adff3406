package schedulers_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/aggflow/aggflow/schedulers"
)

// laneWindow bounds how many items the producer of
// BenchmarkScheduleLanePattern may have in flight, as a dispatcher's lanes
// and pending budget do: the queue then stays small, and the figure is the
// cost of a hand-off, not that of a queue growing for as long as the
// benchmark runs. The channel baseline gets the same window.
const laneWindow = 1024

// lanePattern is the producer's side of the benchmark and its one prebuilt
// task, which counts its runs and closes fin at the last.
type lanePattern struct {
	n    int64
	ran  atomic.Int64
	fin  chan struct{}
	task schedulers.Task
}

func newLanePattern(n int) *lanePattern {
	p := &lanePattern{n: int64(n), fin: make(chan struct{})}
	p.task = func(context.Context) {
		if p.ran.Add(1) == p.n {
			close(p.fin)
		}
	}
	return p
}

// sink keeps the producer's pacing work from being optimised away.
var sink atomic.Uint64

// pace is work the producer does per item (an intake decoding and keying),
// about 100 ns, so that the consumers catch up and go idle between items:
// each hand-off then finds a goroutine looking for work or parked.
func pace(i int64) {
	h := uint64(i)
	for range 100 {
		h = h*6364136223846793005 + 1442695040888963407
	}
	sink.Store(h)
}

// run hands every item to submit, yielding while laneWindow items are in
// flight, and returns once all have run.
func (p *lanePattern) run(b *testing.B, paced bool, submit func(schedulers.Task) error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range p.n {
		if paced {
			pace(i)
		}
		for i-p.ran.Load() >= laneWindow {
			runtime.Gosched()
		}
		if err := submit(p.task); err != nil {
			b.Fatal(err)
		}
	}
	if p.n > 0 {
		<-p.fin
	}
}

// BenchmarkScheduleLanePattern is the hand-off of a dispatcher's lane with a
// no-op handler, where nearly every exchange makes its lane ready: one
// producer schedules, per item, one prebuilt task (no closure allocated per
// item) on NewParallel(2), next to the same producer sending to a buffered
// channel read by 2 goroutines and to the task run inline (the floor).
// ns/op is ns per item, its run included. "burst" hands items off as fast as
// it can, "paced" does about 100 ns of work per item first.
func BenchmarkScheduleLanePattern(b *testing.B) {
	const consumers = 2
	for _, mode := range []struct {
		name  string
		paced bool
	}{{"burst", false}, {"paced", true}} {
		b.Run(mode.name+"/parallel", func(b *testing.B) {
			s, err := schedulers.NewParallel("lanes", consumers)
			if err != nil {
				b.Fatal(err)
			}
			disposeAfter(b, s)
			newLanePattern(b.N).run(b, mode.paced, s.Schedule)
		})
		b.Run(mode.name+"/channel", func(b *testing.B) {
			ch := channelPool(b, consumers, laneWindow)
			newLanePattern(b.N).run(b, mode.paced, func(t schedulers.Task) error {
				ch <- t
				return nil
			})
		})
		b.Run(mode.name+"/inline", func(b *testing.B) {
			newLanePattern(b.N).run(b, mode.paced, func(t schedulers.Task) error {
				t(context.Background())
				return nil
			})
		})
	}
}
