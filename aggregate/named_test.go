package aggregate_test

import (
	"strings"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// message is a NamedAggregate whose own equality includes more than the two
// names, like Wow's message classes.
type message struct {
	ctx, agg, body string
}

func (m *message) ContextName() string   { return m.ctx }
func (m *message) AggregateName() string { return m.agg }

// wrapped is a decorator around another NamedAggregate, which may itself be a
// decorator.
type wrapped struct{ inner aggregate.NamedAggregate }

func (w wrapped) ContextName() string                      { return "not-" + w.inner.ContextName() }
func (w wrapped) AggregateName() string                    { return "not-" + w.inner.AggregateName() }
func (w wrapped) NamedAggregate() aggregate.NamedAggregate { return w.inner }

var order = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}

func TestMaterialize(t *testing.T) {
	id := aggregate.NewID(order, "o-1")
	for name, n := range map[string]aggregate.NamedAggregate{
		"materialized":         order,
		"message":              &message{ctx: "sales", agg: "Order", body: "x"},
		"other message":        &message{ctx: "sales", agg: "Order", body: "y"},
		"ID":                   id,
		"decorator":            wrapped{order},
		"decorator of ID":      wrapped{id},
		"decorator of message": wrapped{wrapped{&message{ctx: "sales", agg: "Order"}}},
	} {
		assert.Equal(t, order, aggregate.Materialize(n), name)
	}
	assert.Equal(t, aggregate.MaterializedNamedAggregate{}, aggregate.Materialize(nil))
}

func TestMaterializeDoesNotAllocate(t *testing.T) {
	var id aggregate.NamedAggregate = aggregate.NewID(order, "o-1")
	var m aggregate.NamedAggregate = order
	allocs := testing.AllocsPerRun(100, func() {
		_ = aggregate.Materialize(id)
		_ = aggregate.Materialize(m)
	})
	assert.Zero(t, allocs)
}

func TestParseNamedAggregate(t *testing.T) {
	for _, c := range []struct {
		s, defaultContext string
		want              aggregate.MaterializedNamedAggregate
	}{
		{"sales.Order", "", order},
		{"sales.Order", "ignored-context", order},
		{"a.b.c", "x", aggregate.MaterializedNamedAggregate{Context: "x", Aggregate: "a.b.c"}},
		{"Order", "sales", order},
		{".", "", aggregate.MaterializedNamedAggregate{}},
		{"", "x", aggregate.MaterializedNamedAggregate{Context: "x"}},
	} {
		got, err := aggregate.ParseNamedAggregate(c.s, c.defaultContext)
		require.NoError(t, err, "%q in %q", c.s, c.defaultContext)
		assert.Equal(t, c.want, got, "%q in %q", c.s, c.defaultContext)
	}
	for _, s := range []string{"Order", "a.b.c", ""} {
		_, err := aggregate.ParseNamedAggregate(s, "")
		assert.ErrorIs(t, err, aggregate.ErrInvalidNamedAggregate, "%q", s)
		assert.True(t, strings.HasPrefix(err.Error(), "aggregate: "), err.Error())
	}
}

func TestNamedAggregateStringRoundTrip(t *testing.T) {
	name := rapid.StringMatching(`[^.]*`)
	rapid.Check(t, func(t *rapid.T) {
		m := aggregate.MaterializedNamedAggregate{Context: name.Draw(t, "context"), Aggregate: name.Draw(t, "aggregate")}
		got, err := aggregate.ParseNamedAggregate(m.String(), rapid.String().Draw(t, "default"))
		if err != nil || got != m {
			t.Fatalf("ParseNamedAggregate(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	})
}

func TestID(t *testing.T) {
	id := aggregate.NewID(&message{ctx: "sales", agg: "Order"}, "o-1")
	assert.Equal(t, aggregate.ID{Named: order, ID: "o-1", TenantID: "(0)"}, id)
	assert.Equal(t, "sales", id.ContextName())
	assert.Equal(t, "Order", id.AggregateName())
	assert.Equal(t, aggregate.NamedAggregate(order), id.NamedAggregate())
	assert.Equal(t, "sales.Order/o-1@(0)", id.String())
	// The group depends on the id string only.
	other := aggregate.ID{Named: aggregate.MaterializedNamedAggregate{Context: "x", Aggregate: "Y"}, ID: "o-1", TenantID: "t"}
	assert.Equal(t, id.Mod(896), other.Mod(896))
}
