package partition

import (
	"cmp"
	"slices"
	"sync"
)

// Set holds one Tracker per partition a consumer owns: Tracker on assignment,
// Remove on revocation, Prefixes to commit them all. Look a partition's
// Tracker up once, when the partition is assigned, not once per position: the
// Set's lock is shared by all partitions. Safe for concurrent use; the zero
// value is an empty set, ready to use.
type Set struct {
	mu       sync.Mutex
	trackers map[int32]*Tracker
}

// Prefix is the finished prefix of one partition.
type Prefix struct {
	Partition int32
	Position  int64
}

// Tracker returns the tracker of partition p, creating an empty one if p has
// none.
func (s *Set) Tracker(p int32) *Tracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trackers[p]
	if !ok {
		if s.trackers == nil {
			s.trackers = make(map[int32]*Tracker)
		}
		t = new(Tracker)
		s.trackers[p] = t
	}
	return t
}

// Lookup returns the tracker of partition p, if it has one.
func (s *Set) Lookup(p int32) (*Tracker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trackers[p]
	return t, ok
}

// Remove drops partition p and returns its tracker, so that a revocation can
// commit its last prefix after the partition left the set.
func (s *Set) Remove(p int32) (*Tracker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trackers[p]
	delete(s.trackers, p)
	return t, ok
}

// Len returns the number of partitions held.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.trackers)
}

// Prefixes returns the finished prefix of every partition that has one, by
// increasing partition: what a periodic commit sends. It allocates the slice
// and takes each tracker's lock in turn, not the Set's lock meanwhile.
func (s *Set) Prefixes() []Prefix {
	type held struct {
		p int32
		t *Tracker
	}
	s.mu.Lock()
	all := make([]held, 0, len(s.trackers))
	for p, t := range s.trackers {
		all = append(all, held{p, t})
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b held) int { return cmp.Compare(a.p, b.p) })
	out := make([]Prefix, 0, len(all))
	for _, h := range all {
		if pos, ok := h.t.Prefix(); ok {
			out = append(out, Prefix{Partition: h.p, Position: pos})
		}
	}
	return out
}
