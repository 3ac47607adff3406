package adapter

import (
	"cmp"
	"slices"
	"sync"
)

// Registry is the set of dispatchers, by name, whose gauges an adapter reads
// at collection time. One name is registered at most once: two dispatchers
// of one name would report two values for one label set. Safe for
// concurrent use; registrations are rare, so a mutex is enough.
type Registry[V any] struct {
	mu     sync.Mutex
	byName map[string]V
}

// Add registers v under name, or returns false when name is taken.
func (r *Registry[V]) Add(name string, v V) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.byName[name]; taken {
		return false
	}
	if r.byName == nil {
		r.byName = map[string]V{}
	}
	r.byName[name] = v
	return true
}

// Remove unregisters name, and says whether it was registered.
func (r *Registry[V]) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.byName[name]
	delete(r.byName, name)
	return ok
}

// Entry is one registered value and its name.
type Entry[V any] struct {
	Name  string
	Value V
}

// All returns the registered entries sorted by name: a copy, which the
// caller may read while others register.
func (r *Registry[V]) All() []Entry[V] {
	r.mu.Lock()
	all := make([]Entry[V], 0, len(r.byName))
	for name, v := range r.byName {
		all = append(all, Entry[V]{name, v})
	}
	r.mu.Unlock()
	slices.SortFunc(all, func(a, b Entry[V]) int { return cmp.Compare(a.Name, b.Name) })
	return all
}
