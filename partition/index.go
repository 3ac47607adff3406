package partition

// index maps the positions a Tracker holds to their sequence numbers in its
// ring, so that Finish finds a position in O(1) expected time whatever the
// gaps between positions. It is an open-addressing table with linear probing
// and backward-shift deletion (no tombstones, so a table that holds a steady
// window of positions never degrades nor allocates), kept at most half full.
// A slot is empty when seq is 0: the ring numbers its entries from 1.
type index struct {
	slots []slot
	shift uint8 // 64 - log2(len(slots))
}

type slot struct {
	pos int64
	seq uint64
}

// fibonacci is 2^64 divided by the golden ratio: multiplying by it and keeping
// the high bits spreads consecutive positions over the whole table.
const fibonacci = 0x9E3779B97F4A7C15

// reset makes an empty table of n slots, n a power of two of at least 2.
func (x *index) reset(n int) {
	x.slots = make([]slot, n)
	x.shift = uint8(64 - log2(n))
}

func log2(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

func (x *index) home(pos int64) int {
	return int((uint64(pos) * fibonacci) >> x.shift)
}

// put adds pos, which is not in the table; the caller keeps the table at most
// half full.
func (x *index) put(pos int64, seq uint64) {
	mask := len(x.slots) - 1
	i := x.home(pos)
	for x.slots[i].seq != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = slot{pos: pos, seq: seq}
}

// find returns the slot of pos, or -1.
func (x *index) find(pos int64) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := len(x.slots) - 1
	for i := x.home(pos); x.slots[i].seq != 0; i = (i + 1) & mask {
		if x.slots[i].pos == pos {
			return i
		}
	}
	return -1
}

// get returns the sequence number of pos.
func (x *index) get(pos int64) (uint64, bool) {
	i := x.find(pos)
	if i < 0 {
		return 0, false
	}
	return x.slots[i].seq, true
}

// del removes pos, which is in the table, moving back the entries of its
// probe run that would no longer be found past the hole.
func (x *index) del(pos int64) {
	mask := len(x.slots) - 1
	hole := x.find(pos)
	for j := (hole + 1) & mask; x.slots[j].seq != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j]: then it is found before reaching the hole.
		h := x.home(x.slots[j].pos)
		if (j-h)&mask >= (j-hole)&mask {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = slot{}
}
