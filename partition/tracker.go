package partition

import (
	"fmt"
	"math"
	"sync"
)

// state is where a tracked position stands.
type state uint8

const (
	pending   state = iota // tracked, not ended
	finished               // handled: may be acknowledged once all below it are
	discarded              // ended without being handled: never acknowledged
)

// entry is one tracked position in the ring.
type entry struct {
	pos    int64
	state  state
	direct bool   // not in the index: an intake's, found by its sequence number
	size   uint32 // bytes, as TrackSize was given (0 with Track)
}

// minRing is the ring's first capacity.
const minRing = 16

// Tracker keeps the finished prefix of one partition: the highest position p
// such that every position tracked up to p has finished. Only that prefix may
// be acknowledged (JetStream) or committed (Kafka, as p+1): positions finish
// out of order, since the groups of a partition run concurrently, and a
// position above an unfinished one must wait for it.
//
// The tracking goroutine calls Track for every delivered position, in
// delivery order; the handlers' goroutines call Finish or Discard exactly
// once per tracked position when its exchange ended (the outcome hook of a
// dispatcher, with Discard for the exchanges it discarded). A discarded
// position stops the prefix below it for good: what a forced stop dropped is
// never acknowledged, and the broker delivers it again after a Reset or to
// the partition's next owner. A binding that missed a delivery calls Break:
// Track refuses until a Reset, so the prefix cannot pass the hole.
//
// Cost: O(1) time per position (expected, whatever the gaps between
// positions), memory proportional to the positions held, those above the
// prefix, at about 48 bytes each; the ring and its index double when full and
// are reused after, so the steady state allocates nothing, and they keep the
// size of the most positions ever held. The positions an Intake delivers are
// not indexed: their outcomes find them by the sequence number the Delivery
// carries, in O(1) with no hashing (about half the cost of Track and Finish
// with 16 Ki held: BenchmarkTrackFinishHeld), and Finish or Discard of one
// by its position searches the ring, O(log held). A blocked tracker holds
// every position tracked after the one blocking it, until a Reset. Every
// method takes one short mutex with no foreign code under it; all are safe
// for concurrent use. The zero value is an empty tracker, ready to use; a Tracker must not
// be copied after first use.
type Tracker struct {
	mu sync.Mutex

	// ring holds the positions above the prefix, in tracking order, at
	// sequence numbers [head, tail) (ring[seq & (len-1)]), numbered from 1 so
	// that the index can use 0 for an empty slot.
	ring       []entry
	head, tail uint64
	index      index
	direct     int // entries held that are not in the index (trackDirect)

	prefix    int64 // valid when hasPrefix
	hasPrefix bool
	last      int64 // Track accepts positions above it, when hasLast
	hasLast   bool
	pending   int
	blocked   int64 // the lowest discarded position held, when isBlocked
	isBlocked bool
	broken    bool // Break was called: Track refuses until a Reset

	// The bound above the prefix (SetBound): bytes held, the limits (0: none)
	// and whether the bound was reached and the low-water mark not yet.
	bytes      int64
	maxRecords int
	maxBytes   int64
	full       bool
	freed      chan struct{}
}

// Track records pos as delivered and not yet ended. pos must be above every
// position tracked before (and at least the position of the last Reset);
// otherwise the error wraps ErrOutOfOrder and pos is not tracked. After a
// Break, until a Reset, it wraps ErrBroken.
func (t *Tracker) Track(pos int64) error {
	return t.TrackSize(pos, 0)
}

// TrackSize is Track for a record of size bytes (its key and value, say),
// which count in the bytes held above the prefix (Held, SetBound) until the
// prefix passes pos or a Reset forgets it. Sizes above 4 GiB count as
// 4 GiB; a negative size as 0. Same cost as Track: O(1), no allocation.
func (t *Tracker) TrackSize(pos int64, size int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.track(pos, size, false)
	return err
}

// trackDirect is TrackSize for an intake's delivery, which carries the
// returned sequence number to endDirect: its position is not indexed, so
// that neither end hashes it (Finish and Discard still find it, by a binary
// search).
func (t *Tracker) trackDirect(pos int64, size int) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.track(pos, size, true)
}

// trackBatch is trackDirect for each of recs in turn, under one hold of the
// lock: it appends their deliveries to partition p to ds, up to the first
// that could not be tracked, and returns them with that one's error.
func trackBatch[T any](t *Tracker, p int32, recs []Record[T], ds []Delivery[T]) ([]Delivery[T], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		seq, err := t.track(r.Position, r.Size, true)
		if err != nil {
			return ds, err
		}
		ds = append(ds, Delivery[T]{Exchange: r.Exchange, Partition: p, Position: r.Position, Attempt: r.Attempt, seq: seq})
	}
	return ds, nil
}

// track tracks pos at the tail's sequence number, which it returns
// (under t.mu).
func (t *Tracker) track(pos int64, size int, direct bool) (uint64, error) {
	if t.broken {
		return 0, fmt.Errorf("partition: track %d: after a break in continuity above %d: %w", pos, t.last, ErrBroken)
	}
	if t.hasLast && pos <= t.last {
		return 0, fmt.Errorf("partition: track %d: not above %d: %w", pos, t.last, ErrOutOfOrder)
	}
	if t.head == 0 {
		t.head, t.tail = 1, 1
	}
	if t.tail-t.head == uint64(len(t.ring)) {
		t.grow()
	}
	sz := uint32(min(max(size, 0), math.MaxUint32))
	seq := t.tail
	t.ring[seq&uint64(len(t.ring)-1)] = entry{pos: pos, size: sz, direct: direct}
	if direct {
		t.direct++
	} else {
		t.index.put(pos, seq)
	}
	t.tail++
	t.last, t.hasLast = pos, true
	t.pending++
	t.bytes += int64(sz)
	if t.maxRecords > 0 && !t.full && (t.tail-t.head >= uint64(t.maxRecords) || t.maxBytes > 0 && t.bytes >= t.maxBytes) {
		t.full = true
	}
	return seq, nil
}

// Break records a break in continuity: the broker delivered a position the
// binding did not track (a consumer sequence skipped, a redelivery behind
// the last position, a pull that failed with messages in it). Positions are
// not dense, so the tracker cannot see the hole itself: acknowledging a
// position above it (cumulatively) would acknowledge what was never handled.
// From Break on, Track refuses every position (ErrBroken) until a Reset, so
// the prefix never passes the last position tracked before the break; what
// was tracked still finishes and may be acknowledged. Idempotent, O(1).
func (t *Tracker) Break() {
	t.mu.Lock()
	t.broken = true
	t.mu.Unlock()
}

// Broken reports whether Break was called since the last Reset.
func (t *Tracker) Broken() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broken
}

// grow doubles the ring (and makes the first one) and rebuilds the index at
// twice the ring's size.
func (t *Tracker) grow() {
	n := max(2*len(t.ring), minRing)
	ring := make([]entry, n)
	t.index.reset(2 * n)
	for seq := t.head; seq < t.tail; seq++ {
		e := t.ring[seq&uint64(len(t.ring)-1)]
		ring[seq&uint64(n-1)] = e
		if !e.direct {
			t.index.put(e.pos, seq)
		}
	}
	t.ring = ring
}

// Finish records that the exchange at pos was handled (whatever its outcome:
// a handler's error is the handler's to retry or to park) and moves the
// prefix past it when every position below it has finished. The error wraps
// ErrUntracked or ErrEnded when pos is not pending; nothing changes then.
func (t *Tracker) Finish(pos int64) error {
	return t.end(pos, finished)
}

// Discard records that the exchange at pos ended without being handled (a
// forced stop dropped it): the prefix never passes pos, until a Reset at or
// below it. Errors as for Finish.
func (t *Tracker) Discard(pos int64) error {
	return t.end(pos, discarded)
}

func (t *Tracker) end(pos int64, to state) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.endAt(t.find(pos), pos, to)
}

// endDirect ends pos, tracked by trackDirect at seq: O(1), with no hashing.
// A seq that does not hold pos (a position forgotten by a Reset) falls back
// to Finish's search by position, so it errs as Finish and Discard do.
func (t *Tracker) endDirect(seq uint64, pos int64, to state) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.head || seq >= t.tail || t.ring[seq&uint64(len(t.ring)-1)].pos != pos {
		seq = t.find(pos)
	}
	return t.endAt(seq, pos, to)
}

// find returns the sequence number holding pos, 0 if none: the index's, or
// a binary search of the ring (its positions increase from head to tail)
// while it holds unindexed entries (under t.mu).
func (t *Tracker) find(pos int64) uint64 {
	if seq, ok := t.index.get(pos); ok {
		return seq
	}
	if t.direct == 0 {
		return 0
	}
	mask := uint64(len(t.ring) - 1)
	lo, hi := t.head, t.tail
	for lo < hi {
		mid := lo + (hi-lo)/2
		if t.ring[mid&mask].pos < pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < t.tail && t.ring[lo&mask].pos == pos {
		return lo
	}
	return 0
}

// endAt ends pos, held at seq (0: not held) (under t.mu).
func (t *Tracker) endAt(seq uint64, pos int64, to state) error {
	if seq == 0 {
		if t.hasPrefix && pos <= t.prefix {
			return fmt.Errorf("partition: end %d: at or below the finished prefix %d: %w", pos, t.prefix, ErrEnded)
		}
		return fmt.Errorf("partition: end %d: %w", pos, ErrUntracked)
	}
	e := &t.ring[seq&uint64(len(t.ring)-1)]
	if e.state != pending {
		return fmt.Errorf("partition: end %d: %s before: %w", pos, e.state, ErrEnded)
	}
	e.state = to
	t.pending--
	if to == discarded && (!t.isBlocked || pos < t.blocked) {
		t.blocked, t.isBlocked = pos, true
	}
	if seq == t.head {
		t.advance()
	}
	return nil
}

// advance retires the finished entries at the head into the prefix.
func (t *Tracker) advance() {
	mask := uint64(len(t.ring) - 1)
	for t.head < t.tail {
		e := t.ring[t.head&mask]
		if e.state != finished {
			return
		}
		t.prefix, t.hasPrefix = e.pos, true
		t.forget(e)
		t.bytes -= int64(e.size)
		t.head++
		t.fell()
	}
}

// Prefix returns the finished prefix: the highest position p such that every
// position tracked up to p has finished. ok is false while none has (nothing
// may be acknowledged yet). It only grows, until a Reset at or below it.
func (t *Tracker) Prefix() (pos int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.prefix, t.hasPrefix
}

// Pending returns the number of positions tracked and not yet ended: what a
// drain of the partition waits for.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

// Blocked returns the lowest discarded position still held, which the prefix
// cannot pass: the partition acknowledges nothing more until a Reset at or
// below it makes the broker deliver it again. ok is false when none is held.
func (t *Tracker) Blocked() (pos int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked, t.isBlocked
}

// Reset forgets every position at or above pos, ended or not, because the
// broker delivers again from pos (it was reset to the finished prefix, so pos
// is usually the prefix + 1); Track accepts positions from pos on. A later
// Finish or Discard of a forgotten position is an error wrapping
// ErrUntracked, so call Reset once the exchanges at those positions have
// ended, or a late Finish could end a redelivered position. A Reset at or
// below the prefix starts afresh: the prefix is unknown (ok false) until a
// position from pos on finishes. It ends a Break. It costs O(1) per position
// forgotten.
func (t *Tracker) Reset(pos int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mask := uint64(len(t.ring) - 1)
	for t.tail > t.head {
		e := t.ring[(t.tail-1)&mask]
		if e.pos < pos {
			break
		}
		if e.state == pending {
			t.pending--
		}
		t.forget(e)
		t.bytes -= int64(e.size)
		t.tail--
	}
	t.fell()
	if t.hasPrefix && t.prefix >= pos {
		t.hasPrefix = false
	}
	if t.isBlocked && t.blocked >= pos {
		t.isBlocked = false
	}
	t.last, t.hasLast = pos-1, pos != math.MinInt64
	t.broken = false
}

// forget takes e out of the index, or out of the count of the unindexed
// (under t.mu).
func (t *Tracker) forget(e entry) {
	if e.direct {
		t.direct--
	} else {
		t.index.del(e.pos)
	}
}

func (s state) String() string {
	switch s {
	case finished:
		return "finished"
	case discarded:
		return "discarded"
	}
	return "pending"
}

// FinishedAbove appends to dst the finished positions tracked at or above
// base, as spans of positions tracked one after another, and returns the
// extended slice: the Spans of a FinishedMap at base. A span covers the
// positions between two tracked ones too (a Kafka transaction marker, a
// JetStream sequence of another partition's subject): the binding tracks
// every position it is delivered, in order, or calls Break, so a position
// it did not track there is one the broker never delivers it. A pending or
// discarded position ends a span. O(positions held); it holds the mutex for
// that long, so a binding calls it per acknowledgement, not per record.
func (t *Tracker) FinishedAbove(base int64, dst []Span) []Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) == 0 {
		return dst
	}
	mask := uint64(len(t.ring) - 1)
	open := false
	for seq := t.head; seq < t.tail; seq++ {
		e := t.ring[seq&mask]
		switch {
		case e.pos < base || e.state != finished:
			open = false
		case open:
			dst[len(dst)-1].Last = e.pos
		default:
			dst = append(dst, Span{First: e.pos, Last: e.pos})
			open = true
		}
	}
	return dst
}
