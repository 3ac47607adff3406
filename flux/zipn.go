package flux

import "context"

// Zip3 is Zip over three sources: fn(x, y, z) for each triple of their
// items taken in order, stopping at the shortest. It is Zip(Zip(a, b), c)
// with the same rules, so costs four goroutines per subscription and a
// hop more for the items of a and b; an item left over goes to the discard
// hook for its own type. fn nil gives ErrInvalidArgument.
func Zip3[A, B, C, R any](a Flux[A], b Flux[B], c Flux[C], fn func(A, B, C) R) Flux[R] {
	if fn == nil {
		return Error[R](invalid("Zip3", "nil function"))
	}
	return discardPairs[A, B](Zip(zipPair(a, b), c, func(p pair[A, B], z C) R { return fn(p.a, p.b, z) }))
}

// Zip4 is Zip over four sources: fn(w, x, y, z) for each quadruple of
// their items taken in order, stopping at the shortest. It is
// Zip(Zip(a, b), Zip(c, d)) with the same rules, so costs six goroutines
// per subscription; an item left over goes to the discard hook for its
// own type. fn nil gives ErrInvalidArgument.
func Zip4[A, B, C, D, R any](a Flux[A], b Flux[B], c Flux[C], d Flux[D], fn func(A, B, C, D) R) Flux[R] {
	if fn == nil {
		return Error[R](invalid("Zip4", "nil function"))
	}
	zipped := Zip(zipPair(a, b), zipPair(c, d), func(p pair[A, B], q pair[C, D]) R { return fn(p.a, p.b, q.a, q.b) })
	return discardPairs[A, B](discardPairs[C, D](zipped))
}

// ZipN zips sources of one type: a new slice of len(fs) items, the i-th
// from fs[i], for each round of their items taken in order, stopping at
// the shortest, with Zip's rules; an item left over goes to the discard
// hook for T. No source: Empty; one: each of its items in a slice of one.
// Built of nested Zips, it costs 2(len(fs)-1) goroutines per subscription,
// and each round copies its slice once per source.
func ZipN[T any](fs []Flux[T]) Flux[[]T] {
	if len(fs) == 0 {
		return Empty[[]T]()
	}
	acc := Map(fs[0], func(v T) round[T] { return round[T]{[]T{v}} })
	for _, f := range fs[1:] {
		acc = Zip(acc, f, func(r round[T], v T) round[T] { return round[T]{append(r.vs[:len(r.vs):len(r.vs)], v)} })
	}
	zipped := Map(acc, func(r round[T]) []T { return r.vs })
	return discardParts(zipped, func(ctx context.Context) func(round[T], error) {
		discard := discarder[T](ctx)
		return func(r round[T], reason error) { discardAll(discard, r.vs, reason) }
	})
}

// pair is a round of two zipped sources, inside Zip3 and Zip4; round is
// one of ZipN's, so far.
type (
	pair[A, B any] struct {
		a A
		b B
	}
	round[T any] struct{ vs []T }
)

func zipPair[A, B any](a Flux[A], b Flux[B]) Flux[pair[A, B]] {
	return Zip(a, b, func(x A, y B) pair[A, B] { return pair[A, B]{x, y} })
}

// discardPairs gives a pair[A, B] that the Zips inside f drop to the
// discard hooks for A and B of the subscription, item by item.
func discardPairs[A, B, R any](f Flux[R]) Flux[R] {
	return discardParts(f, func(ctx context.Context) func(pair[A, B], error) {
		da, db := discarder[A](ctx), discarder[B](ctx)
		return func(p pair[A, B], reason error) {
			da(p.a, reason)
			db(p.b, reason)
		}
	})
}

// discardParts installs, for the operators in f, the discard hook for the
// private type K that parts builds from the subscription's ctx: it gives
// the parts of a K to the hooks for their own types.
func discardParts[K, R any](f Flux[R], parts func(context.Context) func(K, error)) Flux[R] {
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) error {
		return f.run(WithDiscard(ctx, parts(ctx)), emit)
	}}
}
