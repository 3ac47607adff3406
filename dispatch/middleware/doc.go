// Package middleware wraps dispatch handlers: Retry with backoff, Timeout
// and DeadLetter, composed by Chain. A Middleware[T] takes a
// dispatch.Handler[T] and returns one; it runs inside the one handler call
// the dispatcher makes for an exchange, on the same goroutine.
//
// # Why a retry keeps the group's order
//
// A dispatcher calls the handler for the exchanges of one group one at a
// time, in order: the next starts only after the handler returned for the
// previous one. A middleware is part of that call. Retry's attempts and the
// backoff waits between them all happen before the call returns, so the
// exchange k+1 of a group starts after the last attempt of k, however many
// there were. No reordering buffer and no per-group state are needed: it
// retries one exchange's handling, never resubscribes the group.
//
// # What it costs
//
// While an exchange waits for its next attempt, its group is held (its later
// exchanges wait, by design) and so is one goroutine of the dispatcher's
// scheduler, since the wait is a blocking call. With schedulers.NewParallel
// at GOMAXPROCS, two groups in backoff on two cores hold every goroutine and
// stall all the other groups for the length of the wait. For waits longer
// than a handling time, run the aggregate type on
// schedulers.NewBoundedElastic, so that waiting groups hold goroutines of
// their own. Waiting exchanges also keep their group's later exchanges in
// the dispatcher's pending budget.
//
// # Stops
//
// A ForceStop cancels the handlers' ctx, which ends a backoff wait at once:
// the exchange fails with an error wrapping dispatch.ErrForceStopped (the
// dispatcher counts it cancelled), and DeadLetter does not take it, so a
// broker source does not ack it. A graceful stop leaves the ctx alone: the
// retries go on, within the stop's deadline, after which the stop forces.
//
// # Panics
//
// Nothing here recovers: a panic of the handler, or of a policy, predicate
// or hook called by a middleware, is the handler's panic, which the
// dispatcher recovers into *component.PanicError. A panic is not retried
// and not dead-lettered.
//
// # Order of composition
//
// Chain(h, a, b) calls a, then b, then h. The usual stack, outermost first:
// DeadLetter (sees only the final failure), Retry, Timeout (per attempt). A
// Timeout outside Retry bounds the whole exchange, waits included.
package middleware
