package adapter

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/dispatch"
)

// Cache maps the Labels of a dispatcher's events to what an adapter built for
// them (attribute sets, child metrics), built once per Labels. Reads are one
// atomic load and one map lookup, with no lock and no allocation; a miss
// builds the value outside any lock and publishes a copy of the map with it
// (copy on write), so a miss costs O(entries). Labels have a bounded number
// of values (dispatchers x named aggregates), so the map stays small and
// misses stop once every pair was seen. Safe for concurrent use.
type Cache[V any] struct {
	build func(dispatch.Labels) V
	m     atomic.Pointer[map[dispatch.Labels]V]
	mu    sync.Mutex // serialises the writers of m
}

// NewCache returns a Cache whose values are build(l). build must be safe to
// call concurrently: two goroutines missing on the same Labels at once may
// both call it; one result is kept and the other dropped.
func NewCache[V any](build func(dispatch.Labels) V) *Cache[V] {
	return &Cache[V]{build: build}
}

// Get returns the value for l, building it on the first call for l.
func (c *Cache[V]) Get(l dispatch.Labels) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[l]; ok {
			return v
		}
	}
	return c.add(l)
}

// add builds the value for l and publishes it, unless another goroutine
// published one first: then that one is returned, so every caller of Get
// sees one value per Labels.
func (c *Cache[V]) add(l dispatch.Labels) V {
	v := c.build(l) // outside the lock
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if won, ok := (*old)[l]; ok {
			return won
		}
	}
	next := make(map[dispatch.Labels]V, 1)
	if old != nil {
		next = maps.Clone(*old)
	}
	next[l] = v
	c.m.Store(&next)
	return v
}

// Len returns the number of Labels cached.
func (c *Cache[V]) Len() int {
	if m := c.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}
