package aggregate

import "fmt"

// DefaultTenantID is the tenant NewID gives.
const DefaultTenantID = "(0)"

// ID identifies one aggregate instance: its named aggregate, its id (unique
// within the named aggregate across tenants) and its tenant. It is comparable
// and is itself a NamedAggregate whose Materialize is Named.
type ID struct {
	Named    MaterializedNamedAggregate
	ID       string
	TenantID string
}

// NewID returns the ID of id in the materialized form of named, in
// DefaultTenantID.
func NewID(named NamedAggregate, id string) ID {
	return ID{Named: Materialize(named), ID: id, TenantID: DefaultTenantID}
}

// ContextName returns the context of the named aggregate.
func (id ID) ContextName() string { return id.Named.Context }

// AggregateName returns the name of the named aggregate.
func (id ID) AggregateName() string { return id.Named.Aggregate }

// NamedAggregate returns id.Named, so that Materialize unwraps an ID as it
// unwraps any value with this method.
func (id ID) NamedAggregate() NamedAggregate { return id.Named }

// Mod returns GroupKey(id.ID, n): only the id string counts, not the tenant nor
// the names. It panics when n < 1.
func (id ID) Mod(n int) int { return GroupKey(id.ID, n) }

// String returns "context.aggregate/id@tenant", for logs.
func (id ID) String() string {
	return fmt.Sprintf("%s/%s@%s", id.Named, id.ID, id.TenantID)
}

// IDCapable is implemented by exchanges that are addressed to one aggregate
// instance; dispatchers route them by AggregateID().Mod(groups).
type IDCapable interface {
	AggregateID() ID
}
