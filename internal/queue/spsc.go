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
// time, lock-free: a Push is a slot write and two atomic adds, a Peek/Pop
// pair a slot read and, once per run of available items, an atomic load.
// Items live in linked chunks of 32; the consumer hands the chunk it left
// back to the producer, so a queue that does not grow does not allocate,
// and further chunks go through Chunks, a pool that queues of one item type
// may share, so that a queue growing and shrinking does not allocate either.
// A consumer that finds the queue empty may Release its chunks to the pool:
// an idle queue then holds none, and the producer's next Push takes one.
//
// Roles: Next, Publish and Push belong to the producer; Peek, Pop, Len,
// Trim, Mark and Release to the consumer. A role may move to another
// goroutine only across a happens-before edge (a lane hands its consumer
// role over with an atomic state word). The zero value is an empty queue
// that holds no chunk until the first Push.
type SPSC[T any] struct {
	// producer side, written per push. tail is atomic only for Release,
	// which takes it back from a queue whose producer is not writing.
	tail    atomic.Pointer[chunk[T]]
	tailPos int
	staged  uint64        // items appended by Stage and not yet published
	open    bool          // writing is set: a Next since the last Flush
	pushed  atomic.Uint64 // items published, with the writing and released bits
	// Read-mostly fields between the two sides, and spacing, so that the
	// producer's and the consumer's fields are at least a cache line apart
	// (no line holds both) with no more padding than that.
	spare  atomic.Pointer[chunk[T]] // the chunk the consumer left last, for the producer's next one
	Chunks *Chunks[T]               // when not nil, recycles the chunks the spare cannot hold
	_      [48]byte
	// consumer side, written per pop
	head    *chunk[T]
	headPos int
	cleared int    // the head chunk's slots below this one are zeroed
	avail   uint64 // items known to be published and not yet popped
	popped  uint64
}

// The two top bits of pushed: writing is set from the first Next after a
// Flush to the next Flush (Publish), so that Release never takes a chunk
// the producer writes or stages into; released is set by
// Release, and cleared by the producer's next Next, which then takes a new
// chunk. The rest counts the items published.
const (
	writing  = 1 << 62
	released = 1 << 63
	counted  = writing - 1
)

// Chunks is a pool of chunks for queues of one item type; safe for
// concurrent use; the zero value is ready. Keep is how many of its queues
// may hold chunks while empty: Release gives a queue's chunks back only
// while more than Keep hold some, so that a few queues that go idle and
// busy again in turn (the lanes of a small dispatcher) do not take chunks
// from the pool and give them back at every turn, while many idle queues
// hold at most Keep queues' worth. Set it before the queues are used.
type Chunks[T any] struct {
	pool    sync.Pool
	Keep    int64
	holding atomic.Int64 // queues that hold chunks
}

// spare reports whether a queue may give its chunks back: more than Keep
// hold some. A nil pool keeps none.
func (p *Chunks[T]) spare() bool { return p == nil || p.holding.Load() > p.Keep }

// held counts a queue's change from holding no chunk to holding some (+1)
// or back (-1).
func (p *Chunks[T]) held(d int64) {
	if p != nil {
		p.holding.Add(d)
	}
}

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
// queue's last item. Producer only; every Next is followed by a Publish
// before the next Next.
func (q *SPSC[T]) Next() *T {
	c := q.tail.Load()
	if !q.open { // the first Next since a Flush: Release is kept off until the next Flush
		q.open = true
		if q.pushed.Add(writing)&released != 0 {
			q.pushed.Add(released) // adding the top bit clears it
			c = nil                // Release took the chunks: start anew
		}
	}
	if c == nil || q.tailPos == chunkLen {
		n := q.spare.Swap(nil)
		if n == nil {
			n = q.Chunks.get()
		}
		// n.next is nil: a chunk is given back unlinked (see Peek), so the
		// producer touches no line of a chunk, likely cold, but the slot it
		// writes. (A link left would not be followed: the consumer reads
		// next only after the producer linked the chunk after it.)
		if c == nil {
			q.head = n // published to the consumer by Publish's add
			q.Chunks.held(1)
		} else {
			c.next.Store(n)
		}
		q.tail.Store(n)
		q.tailPos, c = 0, n
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

// Flush publishes the staged items, if any, and clears writing, in one
// atomic add. Producer only.
func (q *SPSC[T]) Flush() {
	if q.open {
		q.pushed.Add(q.staged - writing) // wraps: adds staged, subtracts the writing bit
		q.staged, q.open = 0, false
	}
}

// Peek returns the first item, which stays queued until Pop; ok is false
// when the queue is empty. Consumer only. The pointer is valid until Pop.
func (q *SPSC[T]) Peek() (v *T, ok bool) {
	if q.avail == 0 {
		q.avail = q.pushed.Load()&counted - q.popped
		if q.avail == 0 {
			return nil, false
		}
	}
	if q.headPos == chunkLen {
		old := q.head
		clear(old.items[q.cleared:]) // let the collector reclaim what it held
		q.head, q.headPos, q.cleared = old.next.Load(), 0, 0
		old.next.Store(nil) // here, where the line is hot, rather than in the producer's Next
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
func (q *SPSC[T]) Len() int { return int(q.pushed.Load()&counted - q.popped) }

// Pushed returns how many items were published so far: safe from any
// goroutine, one atomic load.
func (q *SPSC[T]) Pushed() uint64 { return q.pushed.Load() & counted }

// Mark returns how many items were popped so far. Consumer only: a consumer
// about to give up its role takes a mark first, and may ask Since after.
func (q *SPSC[T]) Mark() uint64 { return q.popped }

// Since reports whether an item was pushed beyond mark: safe from any
// goroutine, as it reads only what the producer publishes.
func (q *SPSC[T]) Since(mark uint64) bool { return q.pushed.Load()&counted > mark }

// Release trims the queue and, if it is empty, the producer is not between
// Next and Publish, and Chunks spares it (see Chunks.Keep), gives its
// chunks to Chunks, so that an idle queue holds nothing; it reports whether
// it did. Consumer only; call it
// when the consumer pauses (a lane going idle). One atomic load, and on
// success two compare-and-swaps and a pool put; the producer's next Next
// takes a chunk from the pool again.
func (q *SPSC[T]) Release() bool {
	q.Trim()
	v := q.pushed.Load()
	if v&(writing|released) != 0 || v&counted != q.popped || q.popped == 0 || !q.Chunks.spare() { // popped 0: never held a chunk
		return false
	}
	c, pos, s := q.head, q.headPos, q.spare.Swap(nil)
	q.head, q.headPos, q.cleared = nil, 0, 0 // before the CAS, which publishes them to the producer
	if !q.pushed.CompareAndSwap(v, v|released) {
		// The producer began a push: keep the chunks.
		q.head, q.headPos, q.cleared = c, pos, pos
		if s != nil && !q.spare.CompareAndSwap(nil, s) {
			q.Chunks.put(s)
		}
		return false
	}
	// The producer no longer writes into c; its next Next starts anew. The
	// tail it holds is c: cleared here, so that the pool's c is not kept by
	// it, unless that Next stored a new one first (never c: c goes to the
	// pool only after this).
	q.tail.CompareAndSwap(c, nil)
	q.Chunks.held(-1)
	q.Chunks.put(c)
	if s != nil {
		q.Chunks.put(s)
	}
	return true
}
