// Package dispatch handles streams of exchanges (messages addressed to an
// aggregate) so that the exchanges of one aggregate are handled one at a
// time, in order, while different aggregates are handled concurrently on
// their aggregate type's scheduler: Dispatcher for one named aggregate,
// MainDispatcher for several behind one source. A Runtime that owns, through
// WithOwned, the scheduler supplier its components borrow is package
// component's. Its engine is native; the flux
// chain GroupBy -> PublishOn -> ConcatMap has the same semantics and serves
// as the reference the engine is tested against.
//
// # The path of one exchange
//
// Five files hold it: intake.go, schedulers/parallel.go, lane.go,
// internal/queue/spsc.go and flow.go.
//
//	source (a Source[T]: flux.Flux, an rxgo Observable through flux, Emit)
//	  -> intake, on the source's own goroutine (intake.go; no router
//	     goroutine, no channel): the gate (shut by a stop), the route
//	     (group = aggregate.GroupKey(id, groups), from AggregateID or,
//	     with WithAggregateKey, the key's hash; or NewKeyed's key), the
//	     pending budget (flow.go: waits while WithMaxPending exchanges are
//	     admitted and not finished), counted exactly once
//	  -> the group's lane (lane.go): an unbounded lock-free
//	     single-producer single-consumer queue (internal/queue) and an
//	     atomic state idle / ready / running; only idle -> ready hands the
//	     lane to the scheduler, as one task
//	  -> any free goroutine of the scheduler (schedulers/parallel.go) runs
//	     that task: up to 64 exchanges of the lane, the handler called
//	     inline, one at a time, in arrival order; then the lane goes back to
//	     the tail of the ready queue if more remain, else idle
//	  -> outcome: success / error / panic (*PanicError) / cancelled, or
//	     discarded with a reason; given to the Observers, the outcome
//	     hooks and the logger, then counted once (Stats)
//
// No goroutine per group or per exchange: a dispatcher costs the
// scheduler's goroutines and one of its own (the source's), and a group
// costs a pointer until it first holds an exchange.
//
// Two parallelism knobs, never mixed: WithParallelism is the number of
// groups (default aggregate.DefaultParallelism, 64 x GOMAXPROCS); the
// scheduler's parallelism is the number of goroutines running handlers of
// one aggregate type (default schedulers.DefaultPoolSize, GOMAXPROCS). Many
// groups share one scheduler.
//
// # Ordering contract
//
// Within one Dispatcher, the exchanges of one group are handled one at a
// time, in the order the source emitted them: the next one starts only after
// the handler of the previous one returned (with success, an error or a
// panic). One aggregate id always maps to the same group for a fixed
// parallelism, so this holds per aggregate. Groups run concurrently, at most
// the scheduler's parallelism at once. Dispatchers of one named aggregate
// that take their scheduler from one SchedulerSupplier share it.
//
// WithKeyOrdering narrows the unit from a group to an aggregate id: the
// exchanges of one id are
// handled one at a time in order, and ids never wait for each other, even
// in one group. The engine is the same; each active id has a lane of its
// own (the lane of an id gone idle is reused for the next new id), under
// the same budget and stops. It costs a task per exchange when ids rarely
// repeat, so the group order stays the default (docs/benchmarks.md has the
// figures).
//
// Not promised:
//   - goroutine affinity: a group's exchanges may run on any goroutine of the
//     scheduler, one batch after another;
//   - order between ids: ids in different groups interleave freely, and ids
//     that collide in one group are serialised together (head-of-line
//     coupling; not under WithKeyOrdering);
//   - order across dispatchers, aggregate types, processes, broker partitions
//     or services;
//   - order between several handlers of one exchange (compose them in the
//     Handler if it matters);
//   - idempotency of handler side effects, or a replacement for an event
//     store's version checks: delivery into a dispatcher is what the source
//     gives.
//
// # Lifecycle
//
// Dispatcher, MainDispatcher and Runtime are each a component.Component,
// on one lifecycle core: NEW -Prepare-> PREPARED -Start->
// RUNNING -Quiesce-> STOPPING -> STOPPED, with ForceStop from anywhere.
// Construction starts nothing; Prepare resolves the schedulers; Start
// subscribes the source (nothing is pulled before); Quiesce closes the intake and lets the admitted exchanges drain;
// ForceStop discards what has not started (ErrForceStopped) and cancels the
// handlers' context. Every exchange the source emits ends exactly once:
// Stats().Received == Succeeded + Failed + Discarded + InFlight, InFlight 0
// after Done. A Runtime runs components as one unit: prepare all, start all,
// stop in reverse, then what it owns, under one deadline. The core, Component
// and Runtime are package component's (component.Lifecycle); components of
// other modules (the broker bindings) hold the same core as a field.
//
// # Failures and budget
//
//   - A handler failure is an outcome and the dispatcher goes on (Continue);
//     StopOnError instead stops the intake, drains, and reports the failure
//     as Err().
//   - StopGracefully quiesces first, then waits. Its ctx bounds the caller's
//     wait; the draining goes on.
//   - A source error stops the intake like Quiesce: admitted exchanges still
//     drain, then Err() reports it.
//   - An exchange the source emits after the intake closed is counted and
//     discarded with ErrStopped; so is what a flux source's operators drop
//     then. The first one after a graceful stop, the item the source had
//     already taken, is handed on.
//   - In a MainDispatcher, a named aggregate whose scheduler ends is
//     retired alone; the others go on.
//   - A key function's panic or out-of-range key fails that one exchange.
//   - Groups are not pinned to goroutines, so a blocked handler holds one
//     goroutine and never another group.
//   - One pending budget is shared by all groups (and by every named
//     aggregate of a MainDispatcher): a slow aggregate can absorb the budget
//     but stalls no other group while budget is left.
//
// docs/from-reactor-and-wow.md maps these names to Wow's and Reactor's and
// lists where the behaviour deliberately differs.
//
// # Observing
//
// Observers (WithObserver, as many as wanted) see every exchange with the
// Labels of its dispatcher and named aggregate, never the aggregate id: the
// metrics seam; observe/otelmetrics and observe/prommetrics (the module
// observe) export them. The outcome hook (WithOutcomeHook) gets each
// exchange's Result exactly once after it ended, discards included: where a
// broker source acks. Results streams the Results to a reader as a Flux,
// an rxgo Observable or an iterator. A handler's error is logged at
// WithFailureLogLevel (Debug by default: routine refusals are counted, not
// printed); a panic at Error. WithContextOf gives each exchange a context
// of its own (a trace), and GroupOf tells a handler its group.
//
// # rxgo at the edges
//
// flux.FromObservable makes an rxgo Observable a Source in one call, and
// Results.Observable hands the outcomes back as one: an rxgo pipeline in,
// grouping and ordering in the dispatcher, an rxgo pipeline out.
//
// # Feedback
//
// A handler may feed follow-up exchanges back into its own dispatcher, but
// not through a bounded source: see Mailbox for why that deadlocks and for a
// source that cannot.
package dispatch
