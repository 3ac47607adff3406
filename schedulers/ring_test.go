package schedulers

import (
	"slices"
	"testing"
)

// FuzzRing drives a ring and a plain slice with the same operations and
// requires the same contents after each one.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 3, 9, 4})
	f.Add(slices.Repeat([]byte{0, 0, 0, 1}, 600))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var r ring[int]
		var model []int
		next := 0
		for _, op := range ops {
			switch op % 5 {
			case 0, 1: // push twice as often as the rest, so that it grows
				r.push(next)
				model = append(model, next)
				next++
			case 2:
				v, ok := r.pop()
				if ok != (len(model) > 0) || ok && v != model[0] {
					t.Fatalf("pop = %d, %v; model %v", v, ok, model)
				}
				if ok {
					model = model[1:]
				}
			case 3:
				dst := make([]int, int(op/5)%80)
				k := r.popInto(dst)
				if want := min(len(dst), len(model)); k != want || !slices.Equal(dst[:k], model[:k]) {
					t.Fatalf("popInto(%d) = %v; model %v", len(dst), dst[:k], model)
				}
				model = model[k:]
			case 4:
				items := make([]int, int(op/5)%5)
				for i := range items {
					items[i] = next
					next++
				}
				r.prepend(items)
				model = append(items, model...)
			}
			if r.len() != len(model) {
				t.Fatalf("len = %d, model %d", r.len(), len(model))
			}
		}
		if got := r.drain(); !slices.Equal(got, model) {
			t.Fatalf("drain = %v, model %v", got, model)
		}
		if r.len() != 0 || len(r.buf) > ringShrinkCap {
			t.Fatalf("after drain: len %d, buffer %d", r.len(), len(r.buf))
		}
	})
}
