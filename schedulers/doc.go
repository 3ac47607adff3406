// Package schedulers runs tasks on goroutines owned by a named scheduler, with
// serial queues (workers) on top, and stops them gracefully or by force.
// Package aggregate caches one scheduler per named aggregate.
//
// # Schedulers
//
//   - NewParallel(name, n): at most n goroutines.
//   - NewSingle(name): one goroutine.
//   - NewBoundedElastic(name, n): at most n goroutines for blocking tasks,
//     each ending after a TTL idle.
//   - Immediate(): the caller's goroutine, no state.
//
// DefaultPoolSize is the usual n of a parallel scheduler,
// DefaultBoundedElasticSize that of a bounded elastic one. Both kinds are one
// engine: same queue, workers, batches, disposal and hooks; they differ only in
// whether idle goroutines retire. The constructors return concrete types
// (*Parallel, *BoundedElastic), which implement Scheduler, so that methods can
// be added to them without breaking implementations of the interface; on error
// the pointer is nil, and storing that in a Scheduler variable gives a non-nil
// interface: test the error, not the value.
//
// # Concurrency contract
//
// Goroutines. A scheduler owns at most n goroutines. The constructor starts
// none; a task that finds no idle goroutine starts one, while fewer than n
// exist. On a parallel scheduler a goroutine once started stays, idle or
// busy, until the scheduler is disposed; on a bounded elastic one it exits
// once idle for the TTL (a timer while idle, no other goroutine). No other
// goroutine is ever started: no evictor, no poller, no goroutine per task or
// per waiter. Goroutines() tells how many there are. Every goroutine carries
// the pprof label scheduler=<name>. A goroutine is started by a Schedule call
// and so joins that caller's testing/synctest bubble, if any: in such tests,
// create, use and dispose a scheduler inside one bubble.
//
// What blocks. Schedule, NewWorker, Worker.Schedule, Worker.Dispose, Dispose
// and IsDisposed never wait for a task: they take one short lock and return
// (except on Immediate, whose Schedule runs the task itself).
// Queues are unbounded, so Schedule never blocks and never fails for lack of
// room; the caller bounds how much it submits. Only DisposeGracefully waits,
// for the goroutines to exit or for its ctx to end, whichever is first.
//
// Ordering. Tasks given to Schedule run in no particular order. Tasks given
// to one Worker run one at a time, in submission order, each seeing the
// effects of the previous one. A Worker is not pinned to a goroutine: a worker
// with pending tasks waits in the scheduler's ready queue; a free goroutine
// takes a batch of at most 64 of its tasks and, if more remain, puts it back
// at the tail. So a task that blocks holds one goroutine and no other worker,
// and a busy worker cannot starve the others. At most n tasks of one
// scheduler run at once.
//
// Contexts. Every task receives a context of the scheduler, cancelled with
// cause ErrDisposed (see context.Cause) when Dispose is called. A task that may
// run long should watch it. The context is done once the scheduler has
// terminated either way: a graceful disposal cancels it with cause
// ErrTerminated when its last goroutine has exited, before Done closes, so that
// a goroutine a task handed it to does not outlive the scheduler unnoticed.
//
// Panics. A task's panic is recovered into a *PanicError (value and stack)
// and handed to the panic hook (WithPanicHook; by default logged at error
// level); the goroutine goes on with the next task. A task that calls
// runtime.Goexit (t.FailNow in a test) ends its goroutine: that is reported
// the same way, as a *PanicError wrapping ErrGoexit, and another goroutine
// takes its place, the worker's next tasks still running in order. Hooks
// must not panic.
//
// # Who must dispose
//
// Whoever calls NewParallel, NewSingle or NewBoundedElastic owns the
// scheduler and must end it, or its goroutines (on a parallel scheduler) and
// its queued tasks live as long as the process:
//
//   - DisposeGracefully(ctx) rejects new tasks with ErrRejected at once, lets
//     every queued task run (direct and on workers), and returns nil when the
//     last goroutine has exited, or ctx.Err() if ctx ends first; draining goes
//     on, and a later call waits for the same end.
//   - Dispose rejects new tasks, drops the queued ones, reporting each to the
//     discard hook (WithDiscardHook) before it returns, cancels the task
//     context and returns without waiting for running tasks. A goroutine in
//     the middle of a worker's batch reports the rest of the batch itself.
//
// Both are idempotent and safe to call concurrently; Dispose may follow
// DisposeGracefully to cut a drain short, and the graceful callers then
// return nil once the goroutines are gone. Done is closed when disposal has
// begun, no goroutine of the scheduler remains and every call of the discard
// hook has returned: after it, nothing more runs or is reported. A disposed
// scheduler does not restart: build a new one. Worker.Dispose drops one
// worker's pending tasks the same way and leaves the scheduler running;
// workers need no disposal otherwise.
package schedulers
