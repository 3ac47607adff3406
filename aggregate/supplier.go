package aggregate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/internal/panics"
	"github.com/aggflow/aggflow/schedulers"
)

// PanicError is a recovered panic of a SchedulerFactory or of a scheduler's
// disposal, with the panic value and the stack.
type PanicError = panics.Error

// SchedulerSupplier hands out one scheduler per named aggregate and owns them:
// stopping the supplier disposes every scheduler it created. All methods are
// safe for concurrent use. Stop the dispatchers that use a supplier before the
// supplier itself: it does not know them and does not wait for them. Wow:
// AggregateSchedulerSupplier (AggregateSchedulerSupplier.kt).
type SchedulerSupplier interface {
	// GetOrInitialize returns the scheduler of Materialize(named), creating it
	// on first access; concurrent first calls for one named aggregate create
	// one scheduler. Once a stop has begun it returns an error wrapping
	// ErrStopped and creates nothing. A nil named gives
	// ErrInvalidNamedAggregate; a factory's error or panic (*PanicError) is
	// returned wrapped, and the next call tries again. Wow: getOrInitialize.
	GetOrInitialize(named NamedAggregate) (schedulers.Scheduler, error)
	// StopGracefully closes creation, lets every scheduler run what it has
	// queued and returns nil once all of them terminated (or the joined
	// disposal errors). If ctx ends first it returns ctx.Err() and the
	// disposal goes on; a later call waits again for the same result. Wow:
	// stopGracefully() bounded by stop(timeout).
	StopGracefully(ctx context.Context) error
	// ForceStop closes creation and disposes every scheduler at once,
	// dropping queued tasks and cancelling the contexts of running ones. It
	// does not wait; pending StopGracefully calls then return nil once the
	// schedulers' goroutines exited. Idempotent. Wow: forceStop().
	ForceStop()
}

// SchedulerFactory creates the scheduler of one named aggregate: name is
// "<supplier name>-<aggregate name>" and parallelism the supplier's (at least
// 1). It is called under the supplier's lock, at most once per named
// aggregate, so it must be quick and must not call back into the supplier.
// The default calls schedulers.NewParallel.
type SchedulerFactory func(name string, parallelism int) (schedulers.Scheduler, error)

// Option configures NewSchedulerSupplier; options apply in order, the last
// one of a kind wins; a nil Option is ignored. They stand for the constructor parameters of Wow's
// DefaultAggregateSchedulerSupplier(name, parallelism).
type Option func(*options)

type options struct {
	parallelism int
	factory     SchedulerFactory
	logger      *slog.Logger
}

// WithParallelism sets the number of goroutines of each named aggregate's
// scheduler (default schedulers.DefaultPoolSize, the CPU count). A value
// below 1 makes NewSchedulerSupplier return ErrInvalidParallelism. It is not a
// dispatcher's group count: see the package doc. Wow: the parallelism
// argument of DefaultAggregateSchedulerSupplier.
func WithParallelism(n int) Option {
	return func(o *options) { o.parallelism = n }
}

// WithSchedulerFactory replaces schedulers.NewParallel as the way schedulers
// are made, for example to count creations in tests or to return
// schedulers.Immediate(). nil keeps the default.
func WithSchedulerFactory(f SchedulerFactory) Option {
	return func(o *options) { o.factory = f }
}

// WithLogger sets the logger for scheduler creation and for panics recovered
// from ForceStop (default slog.Default()). nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

func newParallel(name string, parallelism int) (schedulers.Scheduler, error) {
	return schedulers.NewParallel(name, parallelism)
}

// NewSchedulerSupplier returns a supplier named name that creates, for each
// named aggregate on first access, a scheduler named "<name>-<aggregate name>"
// with the configured parallelism. Two contexts with the same aggregate name
// get two schedulers with the same name. It starts no goroutine. An empty
// name gives ErrInvalidName, a parallelism below 1 ErrInvalidParallelism.
// Wow: DefaultAggregateSchedulerSupplier (AggregateSchedulerSupplier.kt).
//
// Deviations from Wow: StopGracefully starts the disposal when called, where
// Wow's stopGracefully() only builds a Mono that starts on its first
// subscription; a caller's ctx bounds only its own wait, as stop(timeout) does;
// the arguments are validated here rather than at the first scheduler
// creation; the factory is pluggable; a failing or panicking factory is an
// error returned to the caller, and nothing is cached.
func NewSchedulerSupplier(name string, opts ...Option) (SchedulerSupplier, error) {
	o := options{parallelism: schedulers.DefaultPoolSize}
	for _, opt := range opts {
		if opt == nil {
			continue // ignored, as schedulers does
		}
		opt(&o)
	}
	if name == "" {
		return nil, ErrInvalidName
	}
	if o.parallelism < 1 {
		return nil, fmt.Errorf("%w: supplier %q got %d", ErrInvalidParallelism, name, o.parallelism)
	}
	if o.factory == nil {
		o.factory = newParallel
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	s := &supplier{name: name, options: o}
	s.cache.Store(&cache{})
	return s, nil
}

// cache is an immutable map from key to scheduler. Readers load it without a
// lock; creation replaces it by a copy with one more entry. Named aggregates
// are few and created once, so copying is cheaper than any lock on the hot
// read path, and reads never write shared memory.
type cache map[MaterializedNamedAggregate]schedulers.Scheduler

type supplier struct {
	name string
	options
	cache atomic.Pointer[cache]

	mu       sync.Mutex // guards all below, and every replacement of cache
	created  []schedulers.Scheduler
	stopped  bool
	snapshot []schedulers.Scheduler // the terminal snapshot, fixed by the first stop
	done     chan struct{}          // closed when the graceful disposal ended
	result   error                  // written before done is closed
}

func (s *supplier) GetOrInitialize(named NamedAggregate) (schedulers.Scheduler, error) {
	if named == nil {
		return nil, fmt.Errorf("%w: nil, asked of supplier %q", ErrInvalidNamedAggregate, s.name)
	}
	key := Materialize(named)
	if sch, ok := (*s.cache.Load())[key]; ok {
		// Every cached scheduler is in the terminal snapshot, so a hit that
		// races a stop still returns a scheduler that ends up disposed.
		return sch, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("%w: %q", ErrStopped, s.name)
	}
	old := *s.cache.Load()
	if sch, ok := old[key]; ok {
		return sch, nil
	}
	schedName := s.name + "-" + key.Aggregate
	sch, err := s.create(schedName)
	if err != nil {
		return nil, fmt.Errorf("aggregate: supplier %q creating scheduler %q for %s: %w", s.name, schedName, key, err)
	}
	next := make(cache, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = sch
	s.cache.Store(&next)
	s.created = append(s.created, sch)
	s.logger.Debug("aggregate: scheduler created", "supplier", s.name, "scheduler", schedName, "named_aggregate", key.String(), "parallelism", s.parallelism)
	return sch, nil
}

func (s *supplier) create(name string) (sch schedulers.Scheduler, err error) {
	err = guard(func() error {
		sch, err = s.factory(name, s.parallelism)
		if err == nil && sch == nil {
			err = errors.New("factory returned a nil scheduler")
		}
		return err
	})
	return sch, err
}

// closeAndSnapshotLocked stops creation and returns the terminal snapshot: every
// scheduler created, the same slice for every call. Wow: closeAndSnapshot().
func (s *supplier) closeAndSnapshotLocked() []schedulers.Scheduler {
	if !s.stopped {
		s.stopped = true
		s.snapshot = s.created
		s.created = nil
		s.cache.Store(&cache{})
	}
	return s.snapshot
}

func (s *supplier) StopGracefully(ctx context.Context) error {
	s.mu.Lock()
	snapshot := s.closeAndSnapshotLocked()
	if s.done == nil {
		s.done = make(chan struct{})
		go s.disposeGracefully(snapshot)
	}
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return s.result
	default:
	}
	select {
	case <-done:
		return s.result
	case <-ctx.Done():
		return ctx.Err()
	}
}

// disposeGracefully disposes every scheduler of snapshot at once and records
// the joined result. Its context is never cancelled: a caller's deadline ends
// only that caller's wait, and ForceStop is how the disposal is cut short.
func (s *supplier) disposeGracefully(snapshot []schedulers.Scheduler) {
	errs := make([]error, len(snapshot))
	var wg sync.WaitGroup
	for i, sch := range snapshot {
		wg.Go(func() {
			if err := guard(func() error { return sch.DisposeGracefully(context.Background()) }); err != nil {
				errs[i] = fmt.Errorf("aggregate: supplier %q disposing a scheduler: %w", s.name, err)
			}
		})
	}
	wg.Wait()
	s.result = errors.Join(errs...)
	close(s.done)
}

func (s *supplier) ForceStop() {
	s.mu.Lock()
	snapshot := s.closeAndSnapshotLocked()
	s.mu.Unlock()
	for _, sch := range snapshot {
		if err := guard(func() error { sch.Dispose(); return nil }); err != nil {
			s.logger.Error("aggregate: scheduler dispose panicked", "supplier", s.name, "error", err)
		}
	}
}

// guard returns f's error, or f's panic as a *PanicError: user code never
// kills the goroutine that calls it, nor leaves the supplier's lock held.
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panics.New(v)
		}
	}()
	return f()
}

// Borrow returns a non-owning view of s for the children of a composite:
// GetOrInitialize delegates to s, StopGracefully returns nil at once and
// ForceStop does nothing, so that only the owner stops s. A view of a nil s
// returns ErrNilSupplier from GetOrInitialize. Wow:
// BorrowedAggregateSchedulerSupplier (BorrowedAggregateSchedulerSupplier.kt).
func Borrow(s SchedulerSupplier) SchedulerSupplier { return borrowed{s} }

type borrowed struct{ owner SchedulerSupplier }

func (b borrowed) GetOrInitialize(named NamedAggregate) (schedulers.Scheduler, error) {
	if b.owner == nil {
		return nil, ErrNilSupplier
	}
	return b.owner.GetOrInitialize(named)
}

func (borrowed) StopGracefully(context.Context) error { return nil }

func (borrowed) ForceStop() {}
