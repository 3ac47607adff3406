// Package queue holds the unbounded single-producer single-consumer queue
// that a dispatcher's lane is built on.
package queue

import (
	"sync"
	"sync/atomic"
)

// chunkLen is the number of items per chunk: large enough that a chunk
// change (one pointer hop, at most one allocation) is rare, small enough
// that an idle lane that once held an item keeps little.
const chunkLen = 32

type chunk[T any] struct {
	items [chunkLen]T
	next  atomic.Pointer[chunk[T]]
}

// SPSC is an unbounded FIFO queue for one producer and one consumer at a
// time, lock-free: a Push is a slot write and one atomic add, a Peek/Pop
// pair a slot read and, once per run of available items, an atomic load.
// Items live in linked chunks of 32; the consumer hands the chunk it left
// back to the producer, so a queue that does not grow does not allocate,
// and further chunks go through Chunks, a pool that queues of one item type
// may share, so that a queue growing and shrinking does not allocate either.
//
// Roles: Push belongs to the producer; Peek, Pop and Len to the consumer. A role may move to another
// goroutine only across a happens-before edge (a lane hands its consumer
// role over with an atomic state word). The zero value is an empty queue
// that holds no chunk until the first Push.
type SPSC[T any] struct {
	// producer side
	tail    *chunk[T]
	tailPos int
	staged  uint64 // items appended by Stage and not yet published
	pushed  atomic.Uint64
	// The sides on cache lines of their own: a consumer draining the queue
	// does not take the line the producer appends through.
	_ [64]byte
	// consumer side
	head    *chunk[T]
	headPos int
	cleared int    // the head chunk's slots below this one are zeroed
	avail   uint64 // items known to be published and not yet popped
	popped  uint64
	_       [64]byte
	// the chunk the consumer left last, for the producer's next one
	spare atomic.Pointer[chunk[T]]
	// Chunks, when not nil, recycles the chunks the spare cannot hold.
	Chunks *Chunks[T]
}

// Chunks is a pool of chunks for queues of one item type; safe for
// concurrent use; the zero value is ready.
type Chunks[T any] struct{ pool sync.Pool }

func (p *Chunks[T]) get() *chunk[T] {
	if p != nil {
		if c, ok := p.pool.Get().(*chunk[T]); ok {
			return c
		}
	}
	return new(chunk[T])
}

func (p *Chunks[T]) put(c *chunk[T]) {
	if p != nil {
		p.pool.Put(c)
	}
}

// Push appends v. Producer only.
func (q *SPSC[T]) Push(v T) {
	*q.Next() = v
	q.Publish()
}

// Next returns the slot the next Push would fill, for the producer to
// write in place (a large item is then copied once); Publish makes it the
// queue's last item. Producer only; Next without Publish, then Next again,
// returns the same slot.
func (q *SPSC[T]) Next() *T {
	c := q.tail
	if c == nil || q.tailPos == chunkLen {
		n := q.spare.Swap(nil)
		if n == nil {
			n = q.Chunks.get()
		}
		n.next.Store(nil)
		if c == nil {
			q.head = n // published to the consumer by Publish's add
		} else {
			c.next.Store(n)
		}
		q.tail, q.tailPos, c = n, 0, n
	}
	return &c.items[q.tailPos]
}

// Publish appends the item written in the slot Next returned, and
// publishes it with the items staged before it. Producer only.
func (q *SPSC[T]) Publish() {
	q.Stage()
	q.Flush()
}

// Stage appends the item written in the slot Next returned without
// publishing it: the consumer sees it once Flush (or Publish) publishes
// it, with every item staged before, for one atomic add. Producer only.
func (q *SPSC[T]) Stage() {
	q.tailPos++
	q.staged++
}

// Staged returns how many items are staged and not yet published.
// Producer only.
func (q *SPSC[T]) Staged() int { return int(q.staged) }

// Flush publishes the staged items, if any. Producer only.
func (q *SPSC[T]) Flush() {
	if q.staged != 0 {
		q.pushed.Add(q.staged)
		q.staged = 0
	}
}

// Peek returns the first item, which stays queued until Pop; ok is false
// when the queue is empty. Consumer only. The pointer is valid until Pop.
func (q *SPSC[T]) Peek() (v *T, ok bool) {
	if q.avail == 0 {
		q.avail = q.pushed.Load() - q.popped
		if q.avail == 0 {
			return nil, false
		}
	}
	if q.headPos == chunkLen {
		old := q.head
		clear(old.items[q.cleared:]) // let the collector reclaim what it held
		q.head, q.headPos, q.cleared = old.next.Load(), 0, 0
		if !q.spare.CompareAndSwap(nil, old) {
			q.Chunks.put(old)
		}
	}
	return &q.head.items[q.headPos], true
}

// Pop removes the item the last Peek returned. Consumer only; call it only
// after a Peek that returned ok. The slot is zeroed later, a chunk at a
// time or by Trim: zeroing each slot would write to the cache lines the
// producer is writing next.
func (q *SPSC[T]) Pop() {
	q.headPos++
	q.avail--
	q.popped++
}

// Trim zeroes the slots popped since the last Trim or chunk change, so that
// the collector can reclaim what they held. Consumer only; call it when the
// consumer pauses (a lane going idle), so that an idle queue holds nothing
// it was given.
func (q *SPSC[T]) Trim() {
	if q.cleared < q.headPos { // then the consumer saw the head chunk published
		clear(q.head.items[q.cleared:q.headPos])
		q.cleared = q.headPos
	}
}

// Len returns the number of items queued. Consumer only: it is exact, and
// costs one atomic load.
func (q *SPSC[T]) Len() int { return int(q.pushed.Load() - q.popped) }

// Pushed returns how many items were published so far: safe from any
// goroutine, one atomic load.
func (q *SPSC[T]) Pushed() uint64 { return q.pushed.Load() }

// Mark returns how many items were popped so far. Consumer only: a consumer
// about to give up its role takes a mark first, and may ask Since after.
func (q *SPSC[T]) Mark() uint64 { return q.popped }

// Since reports whether an item was pushed beyond mark: safe from any
// goroutine, as it reads only what the producer publishes.
func (q *SPSC[T]) Since(mark uint64) bool { return q.pushed.Load() > mark }
