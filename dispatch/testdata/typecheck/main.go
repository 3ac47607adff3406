// A dispatcher of orders given a discard hook of hooked exchanges (order,
// or invoice with the tag mismatch): it compiles only when hooked is order
// (dispatch/options_test.go).
package main

import (
	"context"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

type order struct{ id aggregate.ID }

func (o order) AggregateID() aggregate.ID { return o.id }

func main() {
	named := aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "a"}
	handle := func(context.Context, order) error { return nil }
	_, _ = dispatch.New("d", named, flux.Empty[order](), handle,
		dispatch.WithParallelism(8),
		dispatch.WithDiscardHook(func(hooked, error) {}))
}
