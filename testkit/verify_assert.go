package testkit

import (
	"fmt"
	"reflect"
	"testing"
)

// Assertions is what a run saw beyond its signals, for checks after it.
// Discards are collected by flux.DoOnDiscard around the Flux under test, for
// its own item type T: every item of type T an operator upstream pulled and
// then dropped (a GroupBy's group queues, a PublishOn's queue, a FlatMap's late
// inner item), unless an inner DoOnDiscard for T under that operator takes them
// first. Items of other types (a Buffer's partial batch of a Flux of slices,
// say) are not seen.
//
// Each method fails tb (Fatal) with an error wrapping ErrExpectation when
// its check does not hold, and returns a for chaining. There are no dropped
// elements or errors (signals after the end or a cancel) to check: a flux
// operator never emits after its downstream refused an item, and the run
// itself fails if one does.
type Assertions[T any] struct {
	tb        testing.TB
	discarded []T
}

// assertions snapshots what the run saw; call it once the subscription has
// returned.
func (m *mailbox[T]) assertions(tb testing.TB) *Assertions[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &Assertions[T]{tb: tb, discarded: append([]T{}, m.discards...)}
}

// Discarded returns the items discarded during the run, in the order the
// hook saw them (no fixed order across goroutines).
func (a *Assertions[T]) Discarded() []T { return append([]T{}, a.discarded...) }

func (a *Assertions[T]) check(ok bool, format string, args ...any) *Assertions[T] {
	if !ok {
		a.tb.Helper()
		a.tb.Fatal(fmt.Errorf("%w: "+format, append([]any{ErrExpectation}, args...)...))
	}
	return a
}

// HasDiscardedElements checks that at least one item was discarded.
func (a *Assertions[T]) HasDiscardedElements() *Assertions[T] {
	a.tb.Helper()
	return a.check(len(a.discarded) > 0, "expected discarded items, none found")
}

// HasNotDiscardedElements checks that no item was discarded.
func (a *Assertions[T]) HasNotDiscardedElements() *Assertions[T] {
	a.tb.Helper()
	return a.check(len(a.discarded) == 0, "expected no discarded items, found %#v", a.discarded)
}

// HasDiscarded checks that each of vs was discarded, in any order and
// among others (reflect.DeepEqual; a value given twice must have been
// discarded twice). It needs at least one value.
func (a *Assertions[T]) HasDiscarded(vs ...T) *Assertions[T] {
	a.tb.Helper()
	_, missing := unmatched(a.discarded, vs)
	return a.check(len(vs) > 0 && len(missing) == 0,
		"expected discarded items to contain %#v, were %#v", vs, a.discarded)
}

// HasDiscardedExactly checks that the items discarded are vs, in any
// order. It needs at least one value (for none, HasNotDiscardedElements).
func (a *Assertions[T]) HasDiscardedExactly(vs ...T) *Assertions[T] {
	a.tb.Helper()
	extra, missing := unmatched(a.discarded, vs)
	return a.check(len(vs) > 0 && len(missing) == 0 && len(extra) == 0,
		"expected discarded items to be exactly %#v, were %#v", vs, a.discarded)
}

// unmatched pairs each of want with a distinct equal element of got and
// returns what is left of each. Quadratic: fine for the sizes of a test.
func unmatched[T any](got, want []T) (extra, missing []T) {
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && reflect.DeepEqual(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	for i, g := range got {
		if !used[i] {
			extra = append(extra, g)
		}
	}
	return extra, missing
}
