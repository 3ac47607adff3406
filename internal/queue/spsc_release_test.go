package queue_test

import (
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/internal/queue"
)

// TestSPSCReleaseModel runs random pushes, pops and releases against a
// slice: a Release succeeds exactly when the queue is empty (and held a
// chunk), and the queue goes on as before after one.
func TestSPSCReleaseModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := queue.SPSC[int]{Chunks: new(queue.Chunks[int])}
		var model []int
		next, pushed := 0, false
		for _, op := range rapid.SliceOf(rapid.IntRange(0, 2)).Draw(t, "ops") {
			switch op {
			case 0:
				q.Push(next)
				model = append(model, next)
				next++
				pushed = true
			case 1:
				p, ok := q.Peek()
				if ok != (len(model) > 0) {
					t.Fatalf("Peek ok %v with %d queued", ok, len(model))
				}
				if ok {
					if *p != model[0] {
						t.Fatalf("Peek %d, want %d", *p, model[0])
					}
					q.Pop()
					model = model[1:]
				}
			case 2:
				got := q.Release()
				if want := len(model) == 0 && pushed; got != want {
					t.Fatalf("Release = %v with %d queued (pushed since the last release: %v)", got, len(model), pushed)
				}
				if got {
					pushed = false
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("Len %d, want %d", q.Len(), len(model))
			}
		}
	})
}

// TestSPSCConcurrentRelease: a consumer that releases the queue whenever it
// finds it empty, as a lane going idle does, while the producer pushes:
// every item arrives once, in order, and -race sees no conflict between a
// Release and the producer's writes.
func TestSPSCConcurrentRelease(t *testing.T) {
	const n = 100_000
	q := queue.SPSC[*int]{Chunks: new(queue.Chunks[*int])}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			v := i
			q.Push(&v)
		}
	})
	want, releases := 0, 0
	for want < n {
		p, ok := q.Peek()
		if !ok {
			if q.Release() {
				releases++
			}
			continue
		}
		if *p == nil || **p != want {
			t.Fatalf("got %v, want %d", *p, want)
		}
		q.Pop()
		want++
	}
	wg.Wait()
	if q.Len() != 0 {
		t.Fatalf("Len %d after draining", q.Len())
	}
	t.Logf("%d releases", releases)
}

// TestSPSCReleasedQueueReusesPooledChunks: a queue released after each
// run takes its chunk back from the pool, without allocating.
func TestSPSCReleasedQueueReusesPooledChunks(t *testing.T) {
	q := queue.SPSC[int]{Chunks: new(queue.Chunks[int])}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 20 {
			q.Push(i)
		}
		for range 20 {
			q.Peek()
			q.Pop()
		}
		if !q.Release() {
			t.Fatal("Release of an empty queue failed")
		}
	})
	// The race detector makes sync.Pool drop a quarter of what is put.
	if allocs > 0.5 {
		t.Fatalf("%v allocations per run", allocs)
	}
}
