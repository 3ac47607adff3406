package flux

import (
	"context"
	"fmt"
)

// KeyedFlux is one group of GroupByKey: the items whose key is Key, in
// arrival order. Its Flux is unicast, as GroupedFlux's: a second Subscribe
// gets an error wrapping ErrUnicastGroup.
type KeyedFlux[K comparable, T any] struct {
	Key K
	Flux[T]
}

// await and resume make KeyedFlux an awaiter, as GroupedFlux, for the
// stall check of FlatMap and ConcatMap.
func (g KeyedFlux[K, T]) await(w *waiter) bool { return GroupedFlux[T]{Flux: g.Flux}.await(w) }
func (g KeyedFlux[K, T]) resume(w *waiter)     { GroupedFlux[T]{Flux: g.Flux}.resume(w) }

// GroupByKey splits f into groups by any comparable key: the first item of
// a key opens its group, emitted downstream as a KeyedFlux; later items of
// the key are queued for it.
//
// At most maxGroups groups are live at once: a group is live from its first
// item until the upstream ends or its subscriber cancels it (Take satisfied,
// say), after which its place goes to the next new key and its own key, if
// it comes again, opens a new group. An item whose key would
// open a group beyond maxGroups is given to the discard hook and the flow
// fails with an error wrapping ErrTooManyGroups that names the key, the
// bound of the memory and goroutines it may cost. Everything else, threading, backpressure,
// termination, cancellation, WithGroupBuffer, WithStallBuffer and ErrStalled
// (naming keys with %v), is GroupBy's, with maxGroups as its groups.
//
// Cost beside GroupBy: a map lookup per item (keyOf's key hashed), and per
// new key a map entry and, at the bound, a scan of the places for one freed.
// maxGroups < 1 or a nil keyOf gives ErrInvalidArgument; a panic in keyOf
// ends the flow with *PanicError. GroupBy, with int keys in [0, groups),
// is the cheaper form when keys are small ints (the dispatcher's buckets).
func GroupByKey[T any, K comparable](f Flux[T], keyOf func(T) K, maxGroups int, opts ...GroupOption) Flux[KeyedFlux[K, T]] {
	o, err := groupOpts("GroupByKey", opts)
	switch {
	case err != nil:
		return Error[KeyedFlux[K, T]](err)
	case keyOf == nil:
		return Error[KeyedFlux[K, T]](invalid("GroupByKey", "nil key function"))
	case maxGroups < 1:
		return Error[KeyedFlux[K, T]](invalid("GroupByKey", "maxGroups below 1"))
	}
	return Flux[KeyedFlux[K, T]]{subscribe: func(ctx context.Context, emit func(KeyedFlux[K, T]) error) error {
		return runBoard(ctx, f, maxGroups, o, func(g GroupedFlux[T]) error {
			return emit(KeyedFlux[K, T]{Key: g.group.tag.(K), Flux: g.Flux})
		}, func(b *board[T]) {
			s := &keySlots[T, K]{b: b, keyOf: keyOf, at: map[K]int{}}
			b.slotOf, b.tagOf = s.slot, func(i int) any { return s.keys[i] }
		})
	}}
}

// keySlots gives each key of a GroupByKey subscription its place in the
// board's open groups; only the router uses it.
type keySlots[T any, K comparable] struct {
	b     *board[T]
	keyOf func(T) K
	at    map[K]int // the place of each key holding one
	keys  []K       // the key of each place taken
}

func (s *keySlots[T, K]) slot(v T) (int, error) {
	k, err := call1(s.keyOf, v)
	if err != nil {
		return 0, err
	}
	if i, ok := s.at[k]; ok {
		return i, nil
	}
	i := len(s.keys)
	if i < len(s.b.open) {
		s.keys = append(s.keys, k)
	} else if i = s.freed(); i < 0 {
		return 0, fmt.Errorf("flux: GroupByKey: key %#v would open a group beyond the %d live: %w", k, len(s.b.open), ErrTooManyGroups)
	} else {
		delete(s.at, s.keys[i])
		s.keys[i] = k
	}
	s.at[k] = i
	return i, nil
}

// freed returns a place whose group its subscriber cancelled, or -1.
func (s *keySlots[T, K]) freed() int {
	for i, g := range s.b.open {
		if g == nil { // its group was refused: the main flux had ended
			return i
		}
		g.mu.Lock()
		gone := g.gone
		g.mu.Unlock()
		if gone {
			return i
		}
	}
	return -1
}
