package queue_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/internal/queue"
)

// TestSPSCStageModel runs random stages, flushes, publishes and pops
// against a model: a staged item is invisible to the consumer (Len, Peek,
// Pushed) until a Flush or a Publish publishes it with those staged
// before, in order.
func TestSPSCStageModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q queue.SPSC[int]
		var published []int
		staged, next, pushed := 0, 0, 0
		for _, op := range rapid.SliceOf(rapid.IntRange(0, 3)).Draw(t, "ops") {
			switch op {
			case 0: // stage
				*q.Next() = next
				q.Stage()
				next++
				staged++
			case 1: // publish
				*q.Next() = next
				q.Publish()
				next++
				staged++
				fallthrough
			case 2: // flush
				if op == 2 {
					q.Flush()
				}
				for i := next - staged; i < next; i++ {
					published = append(published, i)
				}
				pushed += staged
				staged = 0
			case 3: // pop
				v, ok := q.Peek()
				if ok != (len(published) > 0) {
					t.Fatalf("Peek ok %v with %d published", ok, len(published))
				}
				if ok {
					if *v != published[0] {
						t.Fatalf("Peek %d, want %d", *v, published[0])
					}
					q.Pop()
					published = published[1:]
				}
			}
			if q.Len() != len(published) || q.Staged() != staged || q.Pushed() != uint64(pushed) {
				t.Fatalf("Len %d Staged %d Pushed %d, want %d %d %d", q.Len(), q.Staged(), q.Pushed(), len(published), staged, pushed)
			}
		}
	})
}
