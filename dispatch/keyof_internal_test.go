package dispatch

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aggflow/aggflow/aggregate"
)

var keyOfNamed = aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "A"}

type kvValue struct{ k aggregate.Key }

func (x kvValue) AggregateID() aggregate.ID   { return aggregate.NewID(keyOfNamed, x.k.ID()) }
func (x kvValue) AggregateKey() aggregate.Key { return x.k }

type kvPointer struct{ k aggregate.Key }

func (x kvPointer) AggregateID() aggregate.ID    { return aggregate.NewID(keyOfNamed, x.k.ID()) }
func (x *kvPointer) AggregateKey() aggregate.Key { return x.k }

type kvGeneric[P any] struct{ k aggregate.Key }

func (x kvGeneric[P]) AggregateID() aggregate.ID   { return aggregate.NewID(keyOfNamed, x.k.ID()) }
func (x kvGeneric[P]) AggregateKey() aggregate.Key { return x.k }

type kvString struct{ id string }

func (x kvString) AggregateID() aggregate.ID { return aggregate.NewID(keyOfNamed, x.id) }
func (x kvString) AggregateKey() string      { return x.id }

type kvBoth interface {
	aggregate.IDCapable
	aggregate.KeyCapable
}

// keyOf finds AggregateKey() aggregate.Key wherever T's method set has it
// (declared, promoted, on a pointer, generic, local, in an interface) and
// nowhere else, and the function it returns is the method.
func TestKeyOf(t *testing.T) {
	k := aggregate.NewKey("order-1")
	type local struct{ kvValue }
	check := func(name string, want bool, got func() (aggregate.Key, bool)) {
		key, ok := got()
		assert.Equal(t, want, ok, name)
		if ok {
			assert.Equal(t, k, key, name)
		}
	}
	check("value", true, keyedBy(keyOf[kvValue](), kvValue{k}))
	check("pointer, value receiver", true, keyedBy(keyOf[*kvValue](), &kvValue{k}))
	check("value, pointer receiver", false, keyedBy(keyOf[kvPointer](), kvPointer{k}))
	check("pointer, pointer receiver", true, keyedBy(keyOf[*kvPointer](), &kvPointer{k}))
	check("promoted from a value", true, keyedBy(keyOf[local](), local{kvValue{k}}))
	check("promoted from a pointer", true, keyedBy(keyOf[struct{ *kvValue }](), struct{ *kvValue }{&kvValue{k}}))
	check("generic of a local type", true, keyedBy(keyOf[kvGeneric[local]](), kvGeneric[local]{k}))
	check("another result type", false, keyedBy(keyOf[kvString](), kvString{"order-1"}))
	check("interface with the method", true, keyedBy(keyOf[kvBoth](), kvBoth(kvValue{k})))
	check("interface without it", false, keyedBy(keyOf[aggregate.IDCapable](), aggregate.IDCapable(kvValue{k})))
}

func keyedBy[T any](f func(T) aggregate.Key, x T) func() (aggregate.Key, bool) {
	return func() (aggregate.Key, bool) {
		if f == nil {
			return aggregate.Key{}, false
		}
		return f(x), true
	}
}
