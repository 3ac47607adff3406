package queue_test

import (
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/internal/queue"
)

// TestSPSCTrimModel runs random pushes, pops and trims against a slice: a
// Trim never zeroes what is still queued, and after one every slot popped
// so far is zeroed (the queue holds nothing it was given beyond the queued).
func TestSPSCTrimModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := queue.SPSC[*int]{Chunks: new(queue.Chunks[*int])}
		var model []int
		var popped []**int // slots of popped items of the current head chunk or later
		next := 0
		for _, op := range rapid.SliceOf(rapid.IntRange(0, 2)).Draw(t, "ops") {
			switch op {
			case 0:
				v := next
				q.Push(&v)
				model = append(model, next)
				next++
			case 1:
				p, ok := q.Peek()
				if ok != (len(model) > 0) {
					t.Fatalf("Peek ok %v with %d queued", ok, len(model))
				}
				if !ok {
					continue
				}
				if *p == nil || **p != model[0] {
					t.Fatalf("Peek %v, want %d", *p, model[0])
				}
				q.Pop()
				model = model[1:]
				popped = append(popped, p)
			case 2:
				q.Trim()
				for i, p := range popped {
					// A slot of a chunk left may be reused by the producer
					// already; only the ones not reused must be zero.
					if *p != nil && **p < next-len(model) {
						t.Fatalf("popped slot %d still holds %d after Trim", i, **p)
					}
				}
				popped = popped[:0]
			}
			if q.Len() != len(model) {
				t.Fatalf("Len %d, want %d", q.Len(), len(model))
			}
		}
	})
}

// TestSPSCConcurrentTrim: a consumer that trims whenever it finds the queue
// empty, as a lane going idle does, while the producer pushes: every item
// arrives once, in order, and -race sees no conflict between Trim and Push.
func TestSPSCConcurrentTrim(t *testing.T) {
	const n = 100_000
	q := queue.SPSC[*int]{Chunks: new(queue.Chunks[*int])}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			v := i
			q.Push(&v)
		}
	})
	want := 0
	for want < n {
		p, ok := q.Peek()
		if !ok {
			q.Trim()
			continue
		}
		if *p == nil || **p != want {
			t.Fatalf("got %v, want %d", *p, want)
		}
		q.Pop()
		want++
		if want%7 == 0 {
			q.Trim()
		}
	}
	wg.Wait()
	q.Trim()
	if q.Len() != 0 {
		t.Fatalf("Len %d after draining", q.Len())
	}
}
