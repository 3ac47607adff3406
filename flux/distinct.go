package flux

import "context"

// Distinct emits the items not seen before in this subscription and drops
// the repeats, each given to the discard hook with ErrDuplicate. The set of
// seen items belongs to the subscription: it grows with every distinct item
// (one map entry each) and is released when the subscription ends; for an
// endless source with unbounded distinct values, prefer
// DistinctUntilChanged or a key of bounded range. Fused: it runs on the
// delivering goroutine.
func Distinct[T comparable](f Flux[T]) Flux[T] { return DistinctBy(f, identity[T]) }

// DistinctBy is Distinct comparing the keys key(v) instead of the items: an
// item whose key was seen before in this subscription is dropped (discarded
// with ErrDuplicate). Only the keys are kept. A panic in key, or in hashing
// a key of interface type that holds an unhashable value, ends the flow
// with *PanicError, unless OnErrorContinue for T resumes it. key nil gives
// ErrInvalidArgument.
func DistinctBy[T any, K comparable](f Flux[T], key func(T) K) Flux[T] {
	if key == nil {
		return Error[T](invalid("DistinctBy", "nil key function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		seen := make(map[K]struct{})
		// The map is used inside the recovered call: a key of interface
		// type holding an unhashable value panics there, as key would.
		repeat := func(v T) bool {
			k := key(v)
			if _, dup := seen[k]; dup {
				return true
			}
			seen[k] = struct{}{}
			return false
		}
		return dropRepeats(ctx, f, emit, repeat)
	}}
}

// DistinctUntilChanged drops each item equal to the one before it (the
// first is always emitted), each given to the discard hook with
// ErrDuplicate. Keeps one item; fused, no allocation per item.
func DistinctUntilChanged[T comparable](f Flux[T]) Flux[T] {
	return DistinctUntilChangedBy(f, identity[T])
}

// DistinctUntilChangedBy is DistinctUntilChanged comparing the keys key(v):
// an item whose key equals the previous item's key is dropped (discarded
// with ErrDuplicate). A panic in key, or in comparing keys of interface
// type that hold uncomparable values, ends the flow with *PanicError,
// unless OnErrorContinue for T resumes it; the item it failed on is then
// not compared with. key nil gives ErrInvalidArgument.
func DistinctUntilChangedBy[T any, K comparable](f Flux[T], key func(T) K) Flux[T] {
	if key == nil {
		return Error[T](invalid("DistinctUntilChangedBy", "nil key function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		var last K
		first := true
		// The comparison is made inside the recovered call: keys of
		// interface type holding uncomparable values panic there.
		same := func(v T) bool {
			k := key(v)
			if !first && k == last {
				return true
			}
			last, first = k, false
			return false
		}
		return dropRepeats(ctx, f, emit, same)
	}}
}

func identity[T any](v T) T { return v }

// dropRepeats runs f into emit, dropping each item repeat reports as a
// repeat (to the discard hook, with ErrDuplicate). repeat is called in the
// recovered call, so its panic ends the flow with *PanicError unless
// OnErrorContinue for T resumes it.
func dropRepeats[T any](ctx context.Context, f Flux[T], emit func(T) error, repeat func(T) bool) error {
	discard, cont := discarder[T](ctx), continuationOf[T](ctx)
	return f.run(ctx, func(v T) error {
		dup, err := call1(repeat, v)
		switch {
		case err != nil:
			return cont.resume(v, err)
		case dup:
			discard(v, ErrDuplicate)
			return nil
		}
		return emit(v)
	})
}
