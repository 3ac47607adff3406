package dispatch

import (
	"context"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
)

// keyed is an engine's lanes under WithKeyOrdering: one per aggregate id
// that holds or runs exchanges, rather than one per group, so that an id
// waits for nothing but its own exchanges. The lane of an id no longer
// active is reused for the next new id; the state machine of a lane does
// not depend on whose it is, so a consumer still leaving it (see leave)
// drains the next id's exchanges as it would its own.
type keyed[T any] struct {
	// keys is the lane of each id that has one. The producer reads it
	// without the lock and writes it under keyMu; others (the stops, the
	// description of what runs) read it under keyMu. Nil unless
	// WithKeyOrdering.
	keys  *keyTable[T]
	keyMu sync.Mutex
	ring  laneRing[T]       // the lanes of keys, oldest first: where reuse looks; producer only
	ctxs  []context.Context // each group's handlers' context, made on first use; producer only
}

// reuseLooks is how many lanes at the ring's head a new id looks at for one
// to reuse. Two, so that the lanes kept stay within about twice the ids
// active at once: each new id adds at most one lane and looks at two, and a
// lane looked at is reused unless active.
const reuseLooks = 2

// keyLane returns the lane of k's id (g its group), reusing an idle id's
// or making one when the id has none. late, when not nil, is a lane the
// look for reuse found idle with exchanges (a consumer between going idle
// and its look again): taken over, it is ready and the caller schedules it.
// Producer only.
func (e *engine[T]) keyLane(g int, k aggregate.Key) (l, late *lane[T]) {
	id, h := k.ID(), e.keys.hash(k)
	l, same := e.keys.get(id, h)
	if l != nil {
		return l, nil
	}
	if same >= keyFlood {
		e.keyMu.Lock()
		e.keys.hashIDs()
		e.keyMu.Unlock()
		h = e.keys.hash(k)
	}
	for range min(reuseLooks, e.ring.n) {
		c := e.ring.pop()
		e.ring.push(c)
		if c.q.Staged() > 0 || c.state.Load() != idle || !c.state.CompareAndSwap(idle, running) {
			continue // active, or holding exchanges of a batch: this producer's own CAS below is the only other way in
		}
		// This goroutine is c's consumer now: Len is exact.
		if c.q.Len() > 0 {
			c.state.Store(ready)
			late = c
			break
		}
		e.rekey(c, g, id, h)
		c.state.Store(idle) // the consumer role ends: enqueue kicks it as any idle lane
		return c, nil
	}
	l = &lane[T]{e: e, slot: -1}
	l.q.Chunks = &e.chunks
	l.task = l.run
	e.rekey(l, g, id, h)
	e.ring.push(l)
	return l, late
}

// rekey makes l id's lane (h id's hash), in group g. The caller holds l's
// consumer role (or made l), so that no consumer reads the fields
// meanwhile.
func (e *engine[T]) rekey(l *lane[T], g int, id string, h uint64) {
	if e.ctxs == nil {
		e.ctxs = make([]context.Context, len(e.lanes))
	}
	if e.ctxs[g] == nil {
		group := g // GroupOf's value, allocated once per group
		e.ctxs[g] = context.WithValue(e.ctx, groupKeyCtx{}, &group)
	}
	e.keyMu.Lock()
	if l.slot >= 0 { // a new lane is not indexed yet
		e.keys.remove(l)
	}
	l.key, l.group, l.ctx = id, g, e.ctxs[g]
	e.keys.put(l, h)
	e.keyMu.Unlock()
}

// keyLanesNow returns the lanes of keys at this moment.
func (e *engine[T]) keyLanesNow() []*lane[T] {
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	ls := make([]*lane[T], 0, e.keys.n)
	for l := range e.keys.lanes() {
		ls = append(ls, l)
	}
	return ls
}

// keyLanes returns how many lanes by id e keeps.
func (e *engine[T]) keyLanes() int {
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	return e.keys.n
}

// laneRing is a FIFO of lanes in a ring that doubles when full.
type laneRing[T any] struct {
	buf     []*lane[T] // its length a power of two
	head, n int
}

func (r *laneRing[T]) push(l *lane[T]) {
	if r.n == len(r.buf) {
		buf := make([]*lane[T], max(16, 2*len(r.buf)))
		for i := range r.n {
			buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = l
	r.n++
}

func (r *laneRing[T]) pop() *lane[T] {
	l := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return l
}
