package dispatch

import (
	"context"
	"time"

	"github.com/aggflow/aggflow/component"
)

// Result is how one exchange ended, as the outcome hook sees it.
type Result[T any] struct {
	// Exchange is the exchange itself.
	Exchange T
	// Labels name its dispatcher and named aggregate.
	Labels Labels
	// Group is the exchange's group (lane) index, -1 when it never reached
	// one (refused at the intake, or without a valid key).
	Group int
	// Outcome is how it ended; OutcomeDiscarded when dropped unhandled.
	Outcome Outcome
	// Err is nil on success, else the handler's error, the *PanicError, or
	// the reason of the discard (see WithDiscardHook).
	Err error
	// QueueWait is the time from admission to the handler's start (to the
	// drop, for a discarded exchange); Handling the handler's running time.
	// Both are 0 for an exchange refused at the intake.
	QueueWait, Handling time.Duration
}

// WithOutcomeHook calls hook exactly once per exchange received, after it
// ended: handled (success, error, panic, cancelled) or discarded, refusals
// at the intake and drops by ForceStop included. It is the seam where a
// broker source acks what finished. It runs inline on the goroutine that
// ended the exchange (a scheduler goroutine, the source's, or a stop's;
// for a discarded exchange, a goroutine of its own that it waits for),
// concurrently with itself across groups, but in order within a group; ctx
// is the handler's for a handled exchange (see WithContextOf), the
// dispatcher's for a discarded one. The dispatcher counts the exchange as
// ended only after hook returned, so once Stats show nothing in flight (and
// once Done is closed) no call is running. A panic of hook is recovered and
// logged, and the exchange is accounted for as if it had returned; so is a
// runtime.Goexit (a test's t.FailNow), which ends the goroutine it runs on:
// for a discarded exchange the hooks run on a goroutine of their own, which
// the discarding waits for. It must be quick: it delays its group's next
// exchange. Given more than once, every hook is called, in order, even when
// one before it (or the Observer's Finished or Discarded) ends the goroutine
// with runtime.Goexit. nil is invalid. Cost: timing each exchange
// (three clock reads) and one call.
func WithOutcomeHook[T any](outcome func(ctx context.Context, r Result[T])) Option[T] {
	return hook("WithOutcomeHook", func(c *config[T]) {
		if outcome == nil {
			c.reject("nil outcome hook")
			return
		}
		c.outcomes = append(c.outcomes, outcome)
	})
}

// WithContextOf derives each exchange's context from the handler's context
// of its group: of(ctx, x) (for instance, to extract a trace context the
// exchange carries). The result is what the handler, the Observer's Started
// and Finished, the outcome hook and the failure log get; it must keep ctx's
// cancellation (derive from ctx). It runs on the scheduler goroutine right
// before the handler; a panic of it, or a nil result, fails the exchange as
// a handler's panic does (OutcomePanic, a *PanicError), and the handler is
// not called. nil is invalid.
func WithContextOf[T any](of func(ctx context.Context, exchange T) context.Context) Option[T] {
	return hook("WithContextOf", func(c *config[T]) {
		if of == nil {
			c.reject("nil context function")
		}
		c.contextOf = of
	})
}

// groupKeyCtx is the context key of the group index in a handler's ctx;
// its value is a *int.
type groupKeyCtx struct{}

// GroupOf returns the group (lane) index of the exchange whose handler's
// ctx (or a context derived from it) is ctx, in [0, parallelism), so that
// state owned per group can be kept in a slice indexed by it with no
// recomputed key. ok is false for any other context. Each group's context
// is made once, when the group first holds an exchange: no cost per
// exchange.
func GroupOf(ctx context.Context) (group int, ok bool) {
	p, ok := ctx.Value(groupKeyCtx{}).(*int)
	if !ok {
		return 0, false
	}
	return *p, true
}

// hooks are the outcome and discard hooks of an engine, each guarded.
type hooks[T any] struct {
	outcomes []func(context.Context, Result[T])
	discards []func(T, error)
	g        *guardian
}

// handled says whether a hook wants handled exchanges too.
func (h *hooks[T]) handled() bool { return len(h.outcomes) > 0 }

// ended calls the hooks for one exchange that ended: the outcome hooks,
// then, for a discarded exchange, the discard hooks, in order.
func (h *hooks[T]) ended(ctx context.Context, r *Result[T]) { h.endedFrom(0, ctx, r) }

// endedFrom calls the hooks from the i-th on. Each next call is deferred by
// the one before, and deferred calls run while runtime.Goexit unwinds the
// goroutine: a hook that ends its goroutine costs no other hook its call.
// (Panics are recovered by callOutcome and callDiscard.)
func (h *hooks[T]) endedFrom(i int, ctx context.Context, r *Result[T]) {
	n := len(h.outcomes)
	if r.Outcome == OutcomeDiscarded {
		n += len(h.discards)
	}
	if i >= n {
		return
	}
	defer h.endedFrom(i+1, ctx, r)
	if i < len(h.outcomes) {
		h.callOutcome(h.outcomes[i], ctx, r)
	} else {
		h.callDiscard(h.discards[i-len(h.outcomes)], r)
	}
}

// endedAside tells obs (if not nil) and the hooks of a discarded exchange,
// on a goroutine of its own, waited for: the discarding goroutine (a
// stop's, the source's, a scheduler's) goes on with the rest even when the
// Observer's Discarded or a hook ends its goroutine with runtime.Goexit,
// which would otherwise cut the discarding short and keep the dispatcher
// from its end. The hooks are told even when the Observer's Discarded ends
// the goroutine, each hook even when one before it does (see endedFrom), and
// the Goexit is logged as a hook's panic. Discards happen at stops and
// refusals, at most the pending budget at a time: the goroutine is not on
// the path of a handled exchange.
func (h *hooks[T]) endedAside(ctx context.Context, r *Result[T], obs Observer) {
	// Only the guardian's log handler panics out of ended: it has no one else
	// to be told to, and is dropped, as is its report of a Goexit.
	_, exited := component.Aside(func() {
		defer h.ended(ctx, r) // even when Discarded ends the goroutine
		if obs != nil {
			obs.Discarded(ctx, r.Labels, r.Err)
		}
	})
	if exited {
		_, _ = component.Aside(func() {
			h.g.report("discarded exchange's observer or hook", component.NewPanicError(component.ErrGoexit))
		})
	}
}

func (h *hooks[T]) callOutcome(hook func(context.Context, Result[T]), ctx context.Context, r *Result[T]) {
	var p error
	defer h.g.recovered("outcome hook", &p)
	defer component.Catch(&p)
	hook(ctx, *r)
}

func (h *hooks[T]) callDiscard(hook func(T, error), r *Result[T]) {
	var p error
	defer h.g.recovered("discard hook", &p)
	defer component.Catch(&p)
	hook(r.Exchange, r.Err)
}
