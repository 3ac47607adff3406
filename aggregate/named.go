package aggregate

import (
	"fmt"
	"strings"
)

// NamedAggregate names an aggregate type: the bounded context it lives in and
// the aggregate's own name. Implementations must be safe for concurrent reads.
type NamedAggregate interface {
	ContextName() string
	AggregateName() string
}

// MaterializedNamedAggregate is the canonical, comparable form of a
// NamedAggregate: two strings and nothing else, so it can key a map no matter
// which value (a message, an ID, a decorator) carried the names. The zero
// value names the empty aggregate of the empty context.
type MaterializedNamedAggregate struct {
	Context   string
	Aggregate string
}

// ContextName returns m.Context.
func (m MaterializedNamedAggregate) ContextName() string { return m.Context }

// AggregateName returns m.Aggregate.
func (m MaterializedNamedAggregate) AggregateName() string { return m.Aggregate }

// String returns "context.aggregate", the form ParseNamedAggregate reads back.
func (m MaterializedNamedAggregate) String() string { return m.Context + "." + m.Aggregate }

// decorator is a value that carries a NamedAggregate rather than being one
// by its own fields.
type decorator interface {
	NamedAggregate() NamedAggregate
}

// Materialize maps any NamedAggregate to its canonical key: a
// MaterializedNamedAggregate is returned as is, a decorator (any value with a
// method NamedAggregate() NamedAggregate, such as ID) is unwrapped, anything
// else is copied from its two names. A nil n gives the zero value. It does not
// allocate.
func Materialize(n NamedAggregate) MaterializedNamedAggregate {
	for {
		switch v := n.(type) {
		case nil:
			return MaterializedNamedAggregate{}
		case MaterializedNamedAggregate:
			return v
		case ID:
			// The common decorator, matched directly so that no interface
			// conversion of its field is needed.
			return v.Named
		case decorator:
			n = v.NamedAggregate()
		default:
			return MaterializedNamedAggregate{Context: v.ContextName(), Aggregate: v.AggregateName()}
		}
	}
}

// ParseNamedAggregate reads "context.aggregate". When s splits on "." into
// exactly two parts they are the context and the aggregate, and
// defaultContext is ignored; otherwise the whole of s is the aggregate name in
// defaultContext, and an empty defaultContext gives an error wrapping
// ErrInvalidNamedAggregate. So "a.b.c" in "x" is {x, a.b.c}.
func ParseNamedAggregate(s, defaultContext string) (MaterializedNamedAggregate, error) {
	if strings.Count(s, ".") == 1 {
		ctx, agg, _ := strings.Cut(s, ".")
		return MaterializedNamedAggregate{Context: ctx, Aggregate: agg}, nil
	}
	if defaultContext == "" {
		return MaterializedNamedAggregate{}, fmt.Errorf("%w: %q has no context part and the default context is empty", ErrInvalidNamedAggregate, s)
	}
	return MaterializedNamedAggregate{Context: defaultContext, Aggregate: s}, nil
}
