package jetstream

import (
	"sync"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// heldMsg is a delivered message kept until it is acknowledged: with AckAll,
// acknowledging the message at the prefix acknowledges every one below it,
// so only the one at the prefix is ever acknowledged itself.
type heldMsg struct {
	pos int64
	msg natsjs.Msg
}

// held is a partition's delivered messages in delivery order: the fetching
// goroutine pushes, the acknowledging one pops. A ring that doubles when
// full; it holds at most the consumer's MaxAckPending messages, since the
// server delivers no more unacknowledged.
type held struct {
	mu         sync.Mutex
	ring       []heldMsg
	head, size int
}

func (h *held) push(pos int64, msg natsjs.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.size == len(h.ring) {
		ring := make([]heldMsg, max(2*len(h.ring), 64))
		for i := range h.size {
			ring[i] = h.ring[(h.head+i)%len(h.ring)]
		}
		h.ring, h.head = ring, 0
	}
	h.ring[(h.head+h.size)%len(h.ring)] = heldMsg{pos, msg}
	h.size++
}

// popTo removes the messages at or below pos from the front and returns the
// last of them (the one to acknowledge), or nil when none is.
func (h *held) popTo(pos int64) natsjs.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last natsjs.Msg
	for h.size > 0 && h.ring[h.head].pos <= pos {
		last = h.ring[h.head].msg
		h.ring[h.head] = heldMsg{}
		h.head = (h.head + 1) % len(h.ring)
		h.size--
	}
	return last
}
