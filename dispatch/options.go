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

// Option configures New, NewKeyed and NewMain for exchanges of type T.
// Knobs, the options that do not involve T (WithParallelism, WithMaxPending
// ...), are Knob values, which every Option[T] accepts, so they take no type
// argument; hooks (WithOutcomeHook, WithDiscardHook, WithContextOf,
// WithResults, WithKeyOrderingBy) are Options of the type their function
// takes, so a hook of another exchange type does not compile. The zero
// Option is ignored; an invalid one makes the constructor return an error
// wrapping ErrInvalidOption.
type Option[T any] struct{ apply func(configurable) }

// Knob is an Option of every exchange type: a Knob value is assignable to
// Option[T] for any T. The knob options return it. A hook converted to a Knob
// (or to an Option of another type) loses its compile-time check; the
// constructor then refuses it with ErrInvalidOption naming both types.
type Knob = struct{ apply func(configurable) }

// configurable is what an Option applies to: *config[T] for the T of the
// constructor it is given to.
type configurable interface{ knobs() *settings }

// settings are the knobs: everything the options set that does not involve T.
type settings struct {
	groups      int
	scheduler   schedulers.Scheduler
	supplier    aggregate.SchedulerSupplier
	maxPending  int
	policy      ErrorPolicy
	observers   []Observer
	logger      *slog.Logger
	failLevel   slog.Level
	stopTimeout time.Duration
	perKey      bool
	byKey       bool // WithAggregateKey
	invalid     []error
}

type config[T any] struct {
	settings
	outcomes  []func(context.Context, Result[T])
	discards  []func(T, error)
	contextOf func(context.Context, T) context.Context
	ends      []func()       // called at the physical end, before Done closes
	keyOf     func(T) string // WithKeyOrderingBy's
}

func (c *config[T]) knobs() *settings { return &c.settings }

func newConfig[T any](opts []Option[T]) config[T] {
	c := config[T]{settings: settings{
		groups:      aggregate.DefaultParallelism,
		maxPending:  DefaultMaxPending,
		logger:      slog.Default(),
		failLevel:   DefaultFailureLogLevel,
		stopTimeout: component.DefaultShutdownTimeout,
	}}
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&c)
		}
	}
	c.logger = component.GuardLogger(c.logger)
	return c
}

func (s *settings) reject(format string, args ...any) {
	s.invalid = append(s.invalid, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// knob makes the Knob that applies set.
func knob(set func(*settings)) Knob {
	return Knob{func(c configurable) { set(c.knobs()) }}
}

// hook makes the Option[T] that applies set, refusing (by name) a config of
// another exchange type, which only an explicit conversion can bring.
func hook[T any](name string, set func(*config[T])) Option[T] {
	return Option[T]{func(c configurable) {
		tc, ok := c.(*config[T])
		if !ok {
			c.knobs().reject("%s takes %s exchanges, given to a constructor of another type", name, typeName[T]())
			return
		}
		set(tc)
	}}
}

func typeName[T any]() string { return fmt.Sprintf("%T", (*T)(nil))[1:] }

// WithParallelism sets the number of groups (default
// aggregate.DefaultParallelism, 64 x GOMAXPROCS): exchanges are spread over
// groups by aggregate.GroupKey(id, groups), and the exchanges of one group
// are handled one at a time. It is not a number of goroutines: the
// scheduler's parallelism bounds those. A group costs a pointer until it
// first holds an exchange, then about 100 bytes plus a chunk of 32 slots.
// Below 1, the constructor returns ErrInvalidParallelism.
func WithParallelism(groups int) Knob {
	return knob(func(c *settings) { c.groups = groups })
}

// WithKeyOrdering orders by aggregate id rather than by group: the
// exchanges of one id are handled one at a time in admission order, and ids
// never wait for each other, even in one group. Each id that holds or runs
// exchanges has a lane of its own, under the same pending budget; an idle
// id's lane is reused for the next new id, so the lanes kept stay within
// about twice the ids active at once (at most the budget plus the running
// handlers). The group (WithParallelism, GroupOf) is still computed for the
// Results and the handlers' context. Cost: per exchange a look-up in an
// index of lanes by the id's HashCode (by the id's bytes once 3 ids of one
// HashCode meet in it), and a scheduled task when ids rarely repeat within
// a batch (1.3-2.6x the group order's time per exchange at 1,024 and 100k
// ids with a no-op handler: docs/benchmarks.md); memory, a lane and a chunk
// of 32 slots per kept lane, idle or not. For New and NewMain; NewKeyed
// returns ErrInvalidOption (its key is a group: see WithKeyOrderingBy).
func WithKeyOrdering() Knob {
	return knob(func(c *settings) { c.perKey = true })
}

// WithAggregateKey routes New's exchanges by their AggregateKey
// (aggregate.KeyCapable) rather than their AggregateID: a 24-byte key
// instead of a 64-byte ID, and no hashing, since aggregate.NewKey hashed
// the id when the key was made (docs/tuning.md). AggregateKey().ID() must
// be AggregateID().ID: the group, the order and WithKeyOrdering's id then
// come from the key, while the logs and the running exchanges' ids still
// come from AggregateID. A method promoted from an embedded field counts, as
// for any interface. AggregateKey runs where AggregateID would, on the
// source's goroutine or Emit's and EmitBatch's caller's; its panic fails its
// exchange alone with ErrInvalidGroupKey. The route costs one indirect call
// per exchange (an interface assertion when T is an interface type). New
// returns ErrInvalidOption when T has no method AggregateKey() aggregate.Key
// (a value type whose method has a pointer receiver, say), as do NewKeyed
// and NewMain.
func WithAggregateKey() Knob {
	return knob(func(c *settings) { c.byKey = true })
}

// WithKeyOrderingBy is WithKeyOrdering for NewKeyed: exchanges are ordered
// by id(x) (any string, the empty one included), while the key function
// still gives their group. id runs on the intake's goroutine after the key
// function; its panic fails the exchange alone with ErrInvalidGroupKey.
// New and NewMain return ErrInvalidOption (they order by aggregate id:
// WithKeyOrdering); nil is invalid.
func WithKeyOrderingBy[T any](id func(T) string) Option[T] {
	return hook("WithKeyOrderingBy", func(c *config[T]) {
		if id == nil {
			c.reject("nil WithKeyOrderingBy id function")
		}
		c.perKey, c.keyOf = true, id
	})
}

// WithScheduler runs the handlers on s, which the dispatcher borrows: it
// never disposes it, and s must outlive the dispatcher. Exclusive with
// WithSchedulerSupplier; nil is invalid. Without either, the dispatcher owns
// a schedulers.NewParallel("<name>-<aggregate>", schedulers.DefaultPoolSize)
// made at Prepare with the dispatcher's logger, and disposes it at its end.
func WithScheduler(s schedulers.Scheduler) Knob {
	return knob(func(c *settings) {
		if s == nil {
			c.reject("nil scheduler")
		}
		c.scheduler = s
	})
}

// WithSchedulerSupplier makes Prepare take the scheduler from
// s.GetOrInitialize(named aggregate). The supplier is lent: the dispatcher
// never stops it; its owner does, after the dispatcher stopped. Exclusive
// with WithScheduler; nil is invalid.
func WithSchedulerSupplier(s aggregate.SchedulerSupplier) Knob {
	return knob(func(c *settings) {
		if s == nil {
			c.reject("nil scheduler supplier")
		}
		c.supplier = s
	})
}

// WithMaxPending sets the pending budget: at most n exchanges admitted and
// not finished, across every group (default DefaultMaxPending; at least 1).
// When it is used up the intake waits, which slows the source down
// (backpressure); one slow aggregate may use all of it, and the others keep
// flowing while any is left. Memory bound: n exchanges, plus one chunk of 32
// slots per group that holds or held exchanges, plus one spare chunk each.
func WithMaxPending(n int) Knob {
	return knob(func(c *settings) {
		if n < 1 {
			c.reject("max pending %d is below 1", n)
		}
		c.maxPending = n
	})
}

// WithErrorPolicy sets what a handler failure does (default Continue).
func WithErrorPolicy(p ErrorPolicy) Knob {
	return knob(func(c *settings) {
		if p != Continue && p != StopOnError {
			c.reject("unknown error policy %d", int(p))
		}
		c.policy = p
	})
}

// WithObserver adds an Observer of every exchange (default: none). Given
// more than once, every Observer sees every event, in the order given. nil
// is invalid. Cost: timing each exchange (three clock reads) and the calls.
func WithObserver(obs Observer) Knob {
	return knob(func(c *settings) {
		if obs == nil {
			c.reject("nil observer")
			return
		}
		c.observers = append(c.observers, obs)
	})
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
func WithDiscardHook[T any](discard func(exchange T, reason error)) Option[T] {
	return hook("WithDiscardHook", func(c *config[T]) {
		if discard == nil {
			c.reject("nil discard hook")
			return
		}
		c.discards = append(c.discards, discard)
	})
}

// WithLogger sets the logger of failures and lifecycle events, also given
// to the scheduler the dispatcher makes for itself (default
// slog.Default()). nil is invalid.
func WithLogger(l *slog.Logger) Knob {
	return knob(func(c *settings) {
		if l == nil {
			c.reject("nil logger")
		}
		c.logger = l
	})
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
func WithFailureLogLevel(level slog.Level) Knob {
	return knob(func(c *settings) { c.failLevel = level })
}

// WithStopTimeout sets how long Run lets a graceful stop take once its ctx
// ended, before it forces (default component.DefaultShutdownTimeout; positive).
func WithStopTimeout(d time.Duration) Knob {
	return knob(func(c *settings) {
		if d <= 0 {
			c.reject("stop timeout %v is not positive", d)
		}
		c.stopTimeout = d
	})
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
