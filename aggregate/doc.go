// Package aggregate names aggregates, maps aggregate ids to processing groups
// and supplies one scheduler per named aggregate. It ports the identity and
// scheduler-supplier layer of Wow (NamedAggregate.kt, AggregateId.kt,
// MaterializedNamedAggregate.kt, MessageParallelism.kt,
// AggregateSchedulerSupplier.kt).
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
// GroupKey(id, n) is Java's String.hashCode of id floor-modulo n, so an id
// lands in the same group as in Wow, and in the same Redis bucket (mod 128)
// of Wow's event store: GroupKey("order-1", 128) is 114, where Java's
// truncating % would give -14.
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
// SchedulerSupplier (GetOrInitialize only) lends it: the borrower cannot stop
// it, which is what Wow's BorrowedAggregateSchedulerSupplier is for.
//
// # Deviations from Wow
//
//   - Wow's stopGracefully() returns a Mono that does nothing until it is
//     subscribed; StopGracefully starts the disposal when called.
//   - Wow bounds a wait with stop(timeout), which throws when it expires;
//     StopGracefully returns ctx.Err() and the disposal goes on.
//   - Wow throws IllegalStateException after a stop; GetOrInitialize returns
//     an error wrapping ErrStopped.
//   - Wow validates nothing: a parallelism of 0 fails at the first scheduler
//     creation and a group count of 0 at the first message. Here
//     NewSchedulerSupplier returns an error and GroupKey panics for n < 1.
//   - Wow reads the group count from the system property wow.parallelism;
//     here it is the environment variable AGGFLOW_PARALLELISM, and a value
//     that is not a positive integer is ignored rather than fatal.
//   - The scheduler factory is an option (Wow hard-codes
//     Schedulers.newParallel); a factory error or panic is returned to the
//     caller of GetOrInitialize and nothing is cached.
//   - An ID prints as "context.aggregate/id@tenant", not as Wow's
//     AggregateId(contextName=..., ...).
//   - A cached scheduler is looked up without taking the supplier's lock; the
//     lock is taken only to record a creation or to stop, never while the
//     factory runs, which keeps Wow's guarantees (one scheduler per named
//     aggregate; none handed out, and none missed by the snapshot, once a
//     stop began).
package aggregate
