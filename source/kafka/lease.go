package kafka

import "context"

// lease is a partition's assignment as its owner sees it.
type lease struct {
	p      int32
	member string
	epoch  uint64 // the group's generation at the assignment
}

// Lease is a partition's assignment as its handler sees it, from LeaseOf:
// the member that holds it and its epoch, the group's generation at the
// assignment.
type Lease struct {
	Partition int32
	Member    string
	Epoch     uint64
	l         *lease
}

// Valid reports whether the lease is still valid.
func (l Lease) Valid() bool { return l.l != nil }

type leaseCtxKey struct{}

// LeaseOf returns the lease under which a handler runs, from its ctx.
func LeaseOf(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseCtxKey{}).(*lease)
	if !ok {
		return Lease{}, false
	}
	return Lease{Partition: l.p, Member: l.member, Epoch: l.epoch, l: l}, true
}
