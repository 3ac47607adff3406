package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/schedulers"
)

// DefaultMaxPending is the default pending budget of a dispatcher, in
// exchanges: how many may be admitted and not yet finished, across all its
// groups (a MainDispatcher's children share one budget). docs/tuning.md
// says when to change it.
const DefaultMaxPending = 4096

// Option configures New, NewKeyed and NewMain for exchanges of type T. A
// nil Option is ignored; an invalid one makes the constructor return an
// error wrapping ErrInvalidOption.
type Option[T any] func(*config[T])

type config[T any] struct {
	groups      int
	scheduler   schedulers.Scheduler
	supplier    aggregate.SchedulerSupplier
	maxPending  int
	policy      ErrorPolicy
	observers   []Observer
	outcomes    []func(context.Context, Result[T])
	discards    []func(T, error)
	contextOf   func(context.Context, T) context.Context
	ends        []func() // called at the physical end, before Done closes
	logger      *slog.Logger
	failLevel   slog.Level
	stopTimeout time.Duration
	perKey      bool
	keyOf       func(T) string // WithKeyOrderingBy's
	invalid     []error
}

func newConfig[T any](opts []Option[T]) config[T] {
	c := config[T]{
		groups:      aggregate.DefaultParallelism,
		maxPending:  DefaultMaxPending,
		logger:      slog.Default(),
		failLevel:   DefaultFailureLogLevel,
		stopTimeout: component.DefaultShutdownTimeout,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	c.logger = component.GuardLogger(c.logger)
	return c
}

func (c *config[T]) reject(format string, args ...any) {
	c.invalid = append(c.invalid, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// WithParallelism sets the number of groups (default
// aggregate.DefaultParallelism, 64 x GOMAXPROCS): exchanges are spread over
// groups by aggregate.GroupKey(id, groups), and the exchanges of one group
// are handled one at a time. It is not a number of goroutines: the
// scheduler's parallelism bounds those. A group costs a pointer until it
// first holds an exchange, then about 100 bytes plus a chunk of 32 slots.
// Below 1, the constructor returns ErrInvalidParallelism.
func WithParallelism[T any](groups int) Option[T] {
	return func(c *config[T]) { c.groups = groups }
}

// WithKeyOrdering orders by aggregate id rather than by group: the
// exchanges of one id are handled one at a time in admission order, and ids
// never wait for each other, even in one group. Each id that holds or runs exchanges has a lane of its
// own, under the same pending budget; an idle id's lane is reused for the
// next new id, so the lanes kept stay within about twice the ids active at
// once (at most the budget plus the running handlers). The group
// (WithParallelism, GroupOf) is still computed for the Results and the
// handlers' context. Cost: a map look-up per exchange, and a scheduled task
// per exchange when ids rarely repeat within a batch (2-4x the group
// order's time per exchange at 1,024 and 100k ids with a no-op handler:
// docs/benchmarks.md); memory, a lane and a chunk of 32 slots per kept
// lane, idle or not. For New and NewMain;
// NewKeyed returns ErrInvalidOption (its key is a group: see
// WithKeyOrderingBy).
func WithKeyOrdering[T any]() Option[T] {
	return func(c *config[T]) { c.perKey = true }
}

// WithKeyOrderingBy is WithKeyOrdering for NewKeyed: exchanges are ordered
// by id(x) (any string, the empty one included), while the key function
// still gives their group. id runs on the intake's goroutine after the key
// function; its panic fails the exchange alone with ErrInvalidGroupKey.
// New and NewMain return ErrInvalidOption (they order by AggregateID:
// WithKeyOrdering); nil is invalid.
func WithKeyOrderingBy[T any](id func(T) string) Option[T] {
	return func(c *config[T]) {
		if id == nil {
			c.reject("nil WithKeyOrderingBy id function")
		}
		c.perKey, c.keyOf = true, id
	}
}

// WithScheduler runs the handlers on s, which the dispatcher borrows: it
// never disposes it, and s must outlive the dispatcher. Exclusive with
// WithSchedulerSupplier; nil is invalid. Without either, the dispatcher owns
// a schedulers.NewParallel("<name>-<aggregate>", schedulers.DefaultPoolSize)
// made at Prepare with the dispatcher's logger, and disposes it at its end.
func WithScheduler[T any](s schedulers.Scheduler) Option[T] {
	return func(c *config[T]) {
		if s == nil {
			c.reject("nil scheduler")
		}
		c.scheduler = s
	}
}

// WithSchedulerSupplier makes Prepare take the scheduler from
// s.GetOrInitialize(named aggregate). The supplier is lent: the dispatcher
// never stops it; its owner does, after the dispatcher stopped. Exclusive
// with WithScheduler; nil is invalid.
func WithSchedulerSupplier[T any](s aggregate.SchedulerSupplier) Option[T] {
	return func(c *config[T]) {
		if s == nil {
			c.reject("nil scheduler supplier")
		}
		c.supplier = s
	}
}

// WithMaxPending sets the pending budget: at most n exchanges admitted and
// not finished, across every group (default DefaultMaxPending; at least 1).
// When it is used up the intake waits, which slows the source down
// (backpressure); one slow aggregate may use all of it, and the others keep
// flowing while any is left. Memory bound: n exchanges, plus one chunk of 32
// slots per group that holds or held exchanges, plus one spare chunk each.
func WithMaxPending[T any](n int) Option[T] {
	return func(c *config[T]) {
		if n < 1 {
			c.reject("max pending %d is below 1", n)
		}
		c.maxPending = n
	}
}

// WithErrorPolicy sets what a handler failure does (default Continue).
func WithErrorPolicy[T any](p ErrorPolicy) Option[T] {
	return func(c *config[T]) {
		if p != Continue && p != StopOnError {
			c.reject("unknown error policy %d", int(p))
		}
		c.policy = p
	}
}

// WithObserver adds an Observer of every exchange (default: none). Given
// more than once, every Observer sees every event, in the order given. nil
// is invalid. Cost: timing each exchange (three clock reads) and the calls.
func WithObserver[T any](obs Observer) Option[T] {
	return func(c *config[T]) {
		if obs == nil {
			c.reject("nil observer")
			return
		}
		c.observers = append(c.observers, obs)
	}
}

// WithDiscardHook adds a hook called once for every exchange received and
// dropped without being handled, with the reason: wrapping ErrForceStopped after
// ForceStop; ErrStopped for one the source emitted after the intake closed;
// ErrUnknownAggregate in a MainDispatcher; schedulers.ErrRejected when the
// scheduler refused the group's work. It is the outcome hook's
// OutcomeDiscarded case (WithOutcomeHook), called right after the outcome
// hooks, with the same guarantees. It may run on any goroutine,
// concurrently with itself, and must be quick; a panic of it is recovered
// and logged.
func WithDiscardHook[T any](hook func(exchange T, reason error)) Option[T] {
	return func(c *config[T]) {
		if hook == nil {
			c.reject("nil discard hook")
			return
		}
		c.discards = append(c.discards, hook)
	}
}

// WithLogger sets the logger of failures and lifecycle events, also given
// to the scheduler the dispatcher makes for itself (default
// slog.Default()). nil is invalid.
func WithLogger[T any](l *slog.Logger) Option[T] {
	return func(c *config[T]) {
		if l == nil {
			c.reject("nil logger")
		}
		c.logger = l
	}
}

// DefaultFailureLogLevel is the level at which a handler's failure is
// logged by default: a handler's error is often a routine business refusal,
// which the Observer and the outcome hook count; at the default logger's
// level (Info) it is not printed. Panics are always logged at Error, as are
// lifecycle and pipeline failures.
const DefaultFailureLogLevel = slog.LevelDebug

// WithFailureLogLevel sets the level of the log line of a handler that
// returned an error, or returned one after a ForceStop (OutcomeError and
// OutcomeCancelled; default DefaultFailureLogLevel). The line is logged
// with the handler's ctx and carries the dispatcher, the named aggregate,
// the aggregate id (for New and NewMain exchanges), the outcome and the
// error. A handler's panic is logged at Error whatever the level.
func WithFailureLogLevel[T any](level slog.Level) Option[T] {
	return func(c *config[T]) { c.failLevel = level }
}

// WithStopTimeout sets how long Run lets a graceful stop take once its ctx
// ended, before it forces (default component.DefaultShutdownTimeout; positive).
func WithStopTimeout[T any](d time.Duration) Option[T] {
	return func(c *config[T]) {
		if d <= 0 {
			c.reject("stop timeout %v is not positive", d)
		}
		c.stopTimeout = d
	}
}

// ErrorPolicy says what a handler's failure does to the dispatcher.
type ErrorPolicy int

const (
	// Continue (the default) reports a failed exchange to the logger and the
	// observer and goes on.
	Continue ErrorPolicy = iota
	// StopOnError makes the first failure the dispatcher's Err() and
	// quiesces it: intake stops and admitted exchanges drain.
	StopOnError
)

// String returns "Continue" or "StopOnError".
func (p ErrorPolicy) String() string {
	return enumName(p, "ErrorPolicy", "Continue", "StopOnError")
}
