package queue_test

import (
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/internal/queue"
)

// TestSPSCModel runs random pushes and pops on one goroutine against a slice.
func TestSPSCModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q queue.SPSC[int]
		var model []int
		next := 0
		for _, push := range rapid.SliceOf(rapid.Bool()).Draw(t, "ops") {
			if push {
				q.Push(next)
				model = append(model, next)
				next++
			} else {
				v, ok := q.Peek()
				if ok != (len(model) > 0) {
					t.Fatalf("Peek ok %v with %d queued", ok, len(model))
				}
				if ok {
					if *v != model[0] {
						t.Fatalf("Peek %d, want %d", *v, model[0])
					}
					q.Pop()
					model = model[1:]
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("Len %d, want %d", q.Len(), len(model))
			}
		}
	})
}

// TestSPSCConcurrent has a producer and a consumer on two goroutines: every
// item arrives once, in order (run with -race).
func TestSPSCConcurrent(t *testing.T) {
	const n = 200_000
	var q queue.SPSC[int]
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			q.Push(i)
		}
	})
	want := 0
	for want < n {
		v, ok := q.Peek()
		if !ok {
			continue
		}
		if *v != want {
			t.Fatalf("got %d, want %d", *v, want)
		}
		q.Pop()
		want++
	}
	wg.Wait()
	if q.Len() != 0 {
		t.Fatalf("Len %d after draining", q.Len())
	}
}

// TestSPSCSteadyStateDoesNotAllocate: a queue that holds at most a chunk's
// worth at a time reuses the chunk the consumer left.
func TestSPSCSteadyStateDoesNotAllocate(t *testing.T) {
	var q queue.SPSC[int]
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 20 {
			q.Push(i)
		}
		for range 20 {
			q.Peek()
			q.Pop()
		}
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per run of 20", allocs)
	}
}

// TestSPSCPooledDoesNotAllocate: a queue that grows and shrinks again
// recycles its chunks through the pool.
func TestSPSCPooledDoesNotAllocate(t *testing.T) {
	q := queue.SPSC[int]{Chunks: new(queue.Chunks[int])}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 200 {
			q.Push(i)
		}
		for range 200 {
			q.Peek()
			q.Pop()
		}
	})
	// Without the pool a run needs 6 new chunks; the race detector makes
	// sync.Pool drop a quarter of what is put, hence the margin.
	if allocs > 3 {
		t.Fatalf("%v allocations per run of 200", allocs)
	}
}

func BenchmarkSPSCPushPop(b *testing.B) {
	var q queue.SPSC[int]
	for i := 0; b.Loop(); i++ {
		q.Push(i)
		q.Peek()
		q.Pop()
	}
}

// TestSPSCReleasesPopped: what the queue was given is zeroed once popped and
// trimmed (an idle lane), or once its chunk is left, and not before Trim
// touches what is still queued.
func TestSPSCReleasesPopped(t *testing.T) {
	var q queue.SPSC[*int]
	held := make([]**int, 0, 40)
	for i := range 40 {
		q.Push(&i)
	}
	for range 35 { // crosses the first chunk's end
		p, ok := q.Peek()
		if !ok {
			t.Fatal("Peek found the queue empty")
		}
		held = append(held, p)
		q.Pop()
	}
	q.Trim()
	for i, p := range held {
		if *p != nil {
			t.Fatalf("slot of popped item %d still holds it", i)
		}
	}
	for want := 35; want < 40; want++ {
		p, ok := q.Peek()
		if !ok || **p != want {
			t.Fatalf("after Trim, Peek = %v, %v; want %d", p, ok, want)
		}
		q.Pop()
	}
}
