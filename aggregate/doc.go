// Package aggregate names aggregates, maps aggregate ids to processing groups
// and supplies one scheduler per named aggregate.
//
// # Identities
//
// A NamedAggregate is an aggregate type: a context name and an aggregate name.
// Materialize turns any value carrying the two names (a message, an ID, a
// decorator) into MaterializedNamedAggregate, a comparable two-string struct,
// so that "one scheduler per aggregate type" holds whatever the caller passes.
// An ID adds the instance id and the tenant; exchanges expose it through
// IDCapable.
//
// # Group keys
//
// GroupKey(id, n) is HashCode(id), the value of Java's String.hashCode,
// floor-modulo n, so an id lands in the same group as in a JVM service that
// groups by that hash: GroupKey("order-1", 128) is 114, where a truncating %
// would give -14.
//
// A Key is an id with its HashCode computed once, as a JVM String keeps its
// hash; a dispatcher of dispatch.New given dispatch.WithAggregateKey routes
// an exchange that holds one (KeyCapable) without hashing its id again.
//
// # Two parallelism knobs
//
// They are different things and never mixed:
//
//   - The supplier's parallelism (WithParallelism, default
//     schedulers.DefaultPoolSize = the CPU count, e.g. 2) is the number of
//     goroutines of each named aggregate's scheduler: at most that many
//     exchanges of one aggregate type are handled at the same moment.
//   - A dispatcher's parallelism (default DefaultParallelism = 64 x the CPU
//     count, e.g. 128) is the number of groups: each exchange goes to group
//     GroupKey(id, 128), and a group handles its exchanges one at a time, in
//     order. Groups cost no goroutine: the 128 groups of an aggregate type
//     share the 2 goroutines of its scheduler, taking turns.
//
// So on 2 CPUs one aggregate type has 128 ordered lanes run by 2 goroutines;
// ten aggregate types served by one supplier have ten schedulers, 20
// goroutines at most, started only when work arrives.
//
// # Supplier lifecycle
//
// A supplier creates a scheduler on the first GetOrInitialize of a named
// aggregate and owns it. The first StopGracefully or ForceStop closes creation
// (ErrStopped from then on) and fixes the terminal snapshot, every scheduler
// ever created; both stops act on that snapshot. StopGracefully starts one
// shared disposal whose result every caller observes; a caller's ctx bounds
// only its own wait. ForceStop disposes the snapshot at once and takes over a
// graceful disposal in progress. Neither waits for a factory in progress,
// which runs outside the lock; what it creates after the stop is disposed.
// Done closes once every scheduler created has terminated.
//
// Whoever constructs a Supplier owns it and stops it. Passing it as a
// SchedulerSupplier (GetOrInitialize only) lends it: the borrower cannot
// stop it.
//
// A cached scheduler is looked up without taking the supplier's lock; the
// lock is taken only to record a creation or to stop, never while the
// factory runs. So there is one scheduler per named aggregate, and once a
// stop began none is handed out and none is missed by the snapshot.
package aggregate
