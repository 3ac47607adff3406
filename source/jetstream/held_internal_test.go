package jetstream

import (
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"
)

// fakeMsg is a message known by its position only.
type fakeMsg struct {
	natsjs.Msg
	pos int64
}

// held against a slice: pushes in increasing positions, pops to any
// position, the message popped last is the one at the highest position at
// or below it, and what is left is the rest, in order.
func TestHeldAgainstASlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h held
		var model []int64
		next := int64(1)
		for range rapid.IntRange(0, 300).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "push") {
				next += rapid.Int64Range(1, 3).Draw(t, "gap")
				h.push(next, fakeMsg{pos: next})
				model = append(model, next)
				continue
			}
			to := rapid.Int64Range(0, next+1).Draw(t, "to")
			var want int64 = -1
			for len(model) > 0 && model[0] <= to {
				want, model = model[0], model[1:]
			}
			got := h.popTo(to)
			switch {
			case want < 0 && got != nil:
				t.Fatalf("popTo(%d) = %d, want nothing", to, got.(fakeMsg).pos)
			case want >= 0 && (got == nil || got.(fakeMsg).pos != want):
				t.Fatalf("popTo(%d) = %v, want %d", to, got, want)
			}
			if h.size != len(model) {
				t.Fatalf("%d held, want %d", h.size, len(model))
			}
		}
	})
}
