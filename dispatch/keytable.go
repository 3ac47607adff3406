package dispatch

import (
	"hash/maphash"
	"iter"

	"github.com/aggflow/aggflow/aggregate"
)

// keyTable is WithKeyOrdering's index of lanes by aggregate id: open
// addressing with linear probing, each slot holding a lane and its id's
// hash. A lane knows its slot, so taking it out (when its lane goes to a
// new id) hashes nothing and reads no old id: with 100k ids an old id's
// bytes are cold, and a map's delete would miss on them. A lookup reads an
// id's bytes only when the hashes agree. Not safe for concurrent use: the
// engine's producer writes it under keyMu and reads it without.
//
// The hash is the key's HashCode (made with the key: by the route, for
// the group, or when the exchange made its Key), mixed with the table's
// seed, so that finding an id's slot reads none of its bytes. Ids whose
// HashCodes are equal, which are easy to make, share a slot's run whatever
// the seed; once a lookup meets keyFlood lanes of them the table hashes
// the ids' bytes instead (hashIDs), as a seeded map does, for good.
type keyTable[T any] struct {
	slots []keySlot[T] // a power of two long, at most 3/4 full
	n     int
	seed  maphash.Seed
	byID  bool // hashIDs was called
}

// keyFlood is how many lanes of other ids with its hash a lookup meets
// before the table hashes ids rather than HashCodes: three ids of one
// HashCode indexed at once (the active ids' lanes and the idle ones kept
// for reuse) are an attack or a rare id scheme. Below it, pairs of ids of
// one HashCode lengthen the runs every lookup probes by about 1.4x
// (docs/benchmarks.md); groups of 8 would make it about 7x.
const keyFlood = 2

type keySlot[T any] struct {
	hash uint64
	l    *lane[T] // nil: empty
}

func newKeyTable[T any]() *keyTable[T] {
	return &keyTable[T]{slots: make([]keySlot[T], 64), seed: maphash.MakeSeed()}
}

// hash returns k's hash in t.
func (t *keyTable[T]) hash(k aggregate.Key) uint64 {
	if t.byID {
		return maphash.String(t.seed, k.ID())
	}
	return maphash.Comparable(t.seed, k.HashCode())
}

// get returns the lane of id, whose hash is h, or nil, and how many lanes
// of other ids with hash h it met.
func (t *keyTable[T]) get(id string, h uint64) (l *lane[T], same int) {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.l == nil {
			return nil, same
		}
		if s.hash == h {
			if s.l.key == id {
				return s.l, same
			}
			same++
		}
	}
}

// put indexes l under its key, whose hash is h; l is not indexed and no
// lane is under that key.
func (t *keyTable[T]) put(l *lane[T], h uint64) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.rehash(2 * len(t.slots))
	}
	t.place(l, h)
	t.n++
}

func (t *keyTable[T]) place(l *lane[T], h uint64) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].l != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = keySlot[T]{hash: h, l: l}
	l.slot = int32(i)
}

// rehash places every lane again, by its slot's hash, in n slots.
func (t *keyTable[T]) rehash(n int) {
	old := t.slots
	t.slots = make([]keySlot[T], n)
	for _, s := range old {
		if s.l != nil {
			t.place(s.l, s.hash)
		}
	}
}

// hashIDs makes t hash the ids' bytes from now on, every lane's included.
func (t *keyTable[T]) hashIDs() {
	t.byID = true
	for i := range t.slots {
		if l := t.slots[i].l; l != nil {
			t.slots[i].hash = maphash.String(t.seed, l.key)
		}
	}
	t.rehash(len(t.slots))
}

// remove takes l, which is indexed, out: the entries after it in its run
// move back into the gap (backward-shift deletion), so that a lookup never
// stops at a hole before its entry.
func (t *keyTable[T]) remove(l *lane[T]) {
	mask := uint64(len(t.slots) - 1)
	gap := uint64(l.slot)
	for i := (gap + 1) & mask; t.slots[i].l != nil; i = (i + 1) & mask {
		// The entry at i may fill the gap if its home is not in (gap, i].
		if home := t.slots[i].hash & mask; (i-home)&mask >= (i-gap)&mask {
			t.slots[gap] = t.slots[i]
			t.slots[gap].l.slot = int32(gap)
			gap = i
		}
	}
	t.slots[gap] = keySlot[T]{}
	t.n--
}

// lanes yields every indexed lane.
func (t *keyTable[T]) lanes() iter.Seq[*lane[T]] {
	return func(yield func(*lane[T]) bool) {
		for _, s := range t.slots {
			if s.l != nil && !yield(s.l) {
				return
			}
		}
	}
}
