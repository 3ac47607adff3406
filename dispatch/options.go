package dispatch

import (
	"fmt"
	"log/slog"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
)

// DefaultGroupBuffer is the default capacity of each group's queue, in
// exchanges: flux.DefaultGroupBuffer, Reactor's Queues.XS_BUFFER_SIZE.
const DefaultGroupBuffer = flux.DefaultGroupBuffer

// Option configures New and NewMain. It is not generic: the typed options
// (WithDiscardHook, WithGroupKey) are checked against the exchange type by
// the constructor, which returns ErrInvalidOption on a mismatch. A nil
// Option is ignored.
type Option func(*options)

type options struct {
	parallelism int
	scheduler   schedulers.Scheduler
	supplier    aggregate.SchedulerSupplier
	groupBuffer int
	policy      ErrorPolicy
	observer    Observer
	discardHook any // func(T, error)
	groupKey    any // func(T) int
	logger      *slog.Logger
	failed      func(error) // a MainDispatcher's hook on a child's failure
	invalid     []error
}

// newOptions applies opts, in order, to the defaults; a nil Option is
// ignored.
func newOptions(opts []Option) options {
	o := options{
		parallelism: aggregate.DefaultParallelism,
		groupBuffer: DefaultGroupBuffer,
		observer:    nopObserver{},
		logger:      slog.Default(),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

func (o *options) reject(format string, args ...any) {
	o.invalid = append(o.invalid, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// WithParallelism sets the number of groups (default
// aggregate.DefaultParallelism, 64 x GOMAXPROCS): exchanges are spread over
// groups by aggregate.GroupKey(id, groups), and the exchanges of one group are
// handled one at a time. It is not a number of goroutines: the scheduler's
// parallelism bounds those. Below 1, New returns ErrInvalidParallelism. Wow:
// AggregateDispatcher.parallelism (MessageParallelism.DEFAULT_PARALLELISM).
func WithParallelism(groups int) Option {
	return func(o *options) { o.parallelism = groups }
}

// WithScheduler runs the handlers on s, which the dispatcher borrows: it never
// disposes it. Exclusive with WithSchedulerSupplier; nil is invalid. Wow:
// AggregateDispatcher.scheduler.
func WithScheduler(s schedulers.Scheduler) Option {
	return func(o *options) {
		if s == nil {
			o.reject("nil scheduler")
		}
		o.scheduler = s
	}
}

// WithSchedulerSupplier makes Prepare take the scheduler from
// s.GetOrInitialize(named aggregate); the dispatcher never stops s (its owner
// does, after the dispatcher stopped). Exclusive with WithScheduler; nil is
// invalid. Without either option the dispatcher owns a
// schedulers.NewParallel("<name>-<aggregate name>", schedulers.DefaultPoolSize)
// and disposes it when its pipeline ended. Wow:
// AggregateSchedulerSupplier.getOrInitialize in the dispatcher's construction.
func WithSchedulerSupplier(s aggregate.SchedulerSupplier) Option {
	return func(o *options) {
		if s == nil {
			o.reject("nil scheduler supplier")
		}
		o.supplier = s
	}
}

// WithGroupBuffer sets the capacity of each group's queue, in exchanges
// (default DefaultGroupBuffer; at least 1, else ErrInvalidOption), including
// the exchange being handled. It bounds memory: at most parallelism x n
// exchanges are pulled from the source and not finished, plus one.
func WithGroupBuffer(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.reject("group buffer %d is below 1", n)
		}
		o.groupBuffer = n
	}
}

// WithErrorPolicy sets what a handler failure does (default Continue).
func WithErrorPolicy(p ErrorPolicy) Option {
	return func(o *options) {
		if p != Continue && p != StopOnError {
			o.reject("unknown error policy %d", int(p))
		}
		o.policy = p
	}
}

// WithObserver sets the Observer of every exchange (default: none). nil is
// invalid.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs == nil {
			o.reject("nil observer")
		}
		o.observer = obs
	}
}

// WithDiscardHook is called once for every exchange received and dropped
// without being handled, with the reason: wrapping ErrForceStopped after
// ForceStop; ErrStopped for one the source emitted after the intake closed
// (a source told to stop may still push the exchange it had in hand);
// ErrUnknownAggregate in a MainDispatcher; or the error that broke the
// pipeline, such as a scheduler's schedulers.ErrRejected. It may run on any
// goroutine, concurrently with itself, and must be quick. T must be the
// dispatcher's exchange type, else the constructor returns ErrInvalidOption.
// Reactor: Flux#doOnDiscard; Wow: the TrackedExchange discard hook
// (AggregateDispatcher.kt).
func WithDiscardHook[T any](hook func(exchange T, reason error)) Option {
	return func(o *options) {
		if hook == nil {
			o.reject("nil discard hook")
		}
		o.discardHook = hook
	}
}

// WithGroupKey sets the function that gives an exchange its group, in [0,
// parallelism). An exchange whose key is outside that range, or whose key
// function panics, fails with ErrInvalidGroupKey; the dispatcher goes on. T
// must be the dispatcher's exchange type, else the constructor returns
// ErrInvalidOption. Without it, T must implement aggregate.IDCapable and the
// key is aggregate.GroupKey(x.AggregateID().ID, parallelism), computed without
// allocating. Wow: AggregateDispatcher's T.toGroupKey().
func WithGroupKey[T any](key func(exchange T) int) Option {
	return func(o *options) {
		if key == nil {
			o.reject("nil group key function")
		}
		o.groupKey = key
	}
}

// WithLogger sets the logger of failures and lifecycle events (default
// slog.Default()). nil is invalid.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			o.reject("nil logger")
		}
		o.logger = l
	}
}
