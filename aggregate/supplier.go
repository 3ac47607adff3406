package aggregate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/schedulers"
)

// PanicError is a recovered panic of a SchedulerFactory or of a scheduler's
// disposal (component.PanicError), with the panic value (Value) and the
// stack (Stack).
type PanicError = component.PanicError

// SchedulerSupplier is what a borrower of a supplier needs: one scheduler per
// named aggregate. Whoever constructs a Supplier owns it and stops it;
// passing it to a constructor (a dispatcher's WithSchedulerSupplier) lends
// it: the borrower never stops it, and its owner stops it after every
// borrower. *Supplier implements it.
type SchedulerSupplier interface {
	// GetOrInitialize returns the scheduler of Materialize(named), creating
	// it on first access; see Supplier.GetOrInitialize.
	GetOrInitialize(named NamedAggregate) (schedulers.Scheduler, error)
}

// SchedulerFactory creates the scheduler of one named aggregate: name is
// "<supplier name>-<aggregate name>" and parallelism the supplier's (at least
// 1). It is called outside the supplier's lock, by the first caller of
// GetOrInitialize for a named aggregate, and never twice at once for one
// named aggregate. It may take its time: a stop does not wait for it. It
// must not call GetOrInitialize for the named aggregate it is creating (that
// call would wait for itself). The default calls schedulers.NewParallel with
// the supplier's logger.
type SchedulerFactory func(name string, parallelism int) (schedulers.Scheduler, error)

// Option configures NewSchedulerSupplier; options apply in order, the last
// one of a kind wins; a nil Option is ignored.
type Option func(*options)

type options struct {
	parallelism int
	factory     SchedulerFactory
	logger      *slog.Logger
}

// WithParallelism sets the number of goroutines of each named aggregate's
// scheduler (default schedulers.DefaultPoolSize, the CPU count). A value
// below 1 makes NewSchedulerSupplier return ErrInvalidParallelism. It is not a
// dispatcher's group count: see the package doc.
func WithParallelism(n int) Option {
	return func(o *options) { o.parallelism = n }
}

// WithSchedulerFactory replaces schedulers.NewParallel as the way schedulers
// are made, for example to count creations in tests or to return
// schedulers.Immediate(). nil keeps the default.
func WithSchedulerFactory(f SchedulerFactory) Option {
	return func(o *options) { o.factory = f }
}

// WithLogger sets the logger of the supplier (scheduler creation, panics
// recovered from a disposal) and of the schedulers the default factory
// creates (schedulers.WithLogger: their task panics). Default slog.Default();
// nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Supplier hands out one scheduler per named aggregate and owns them:
// stopping the supplier disposes every scheduler it created.
//
// Lifecycle: a Supplier starts RUNNING. The first StopGracefully or
// ForceStop closes creation (ErrStopped from then on) and fixes the terminal
// snapshot, every scheduler created; both stops act on that snapshot, and a
// scheduler created by a factory that returns after the stop began is
// disposed at once. Done closes once the supplier is stopped and every
// scheduler of the snapshot has terminated (its goroutines exited), whichever
// stop came first, and no factory call is in progress; Err is then the
// joined disposal errors.
//
// Stop the dispatchers that borrow a supplier before the supplier itself: it
// does not know them and does not wait for them. A component.Runtime does it
// for the supplier it owns (component.WithOwned).
//
// All methods are safe for concurrent use. No lock is held while the factory
// or a scheduler's disposal runs; a panic in either is recovered and
// reported as a *PanicError.
type Supplier struct {
	life component.Lifecycle
	options
	cache atomic.Pointer[cache]

	mu       sync.Mutex // guards all below, and every replacement of cache
	created  []entry
	flights  map[MaterializedNamedAggregate]*flight // creations in progress
	closed   bool                                   // creation is closed: a stop began
	closing  chan struct{}                          // closed with closed
	snapshot []entry                                // the terminal snapshot, fixed by the first stop
	errs     []error                                // disposal failures, joined into Err
}

// entry is a scheduler the supplier created, with the name it gave it.
type entry struct {
	name string
	sch  schedulers.Scheduler
}

// flight is one creation in progress; callers asking for the same named
// aggregate meanwhile wait for done, then share its result.
type flight struct {
	done chan struct{}
	sch  schedulers.Scheduler
	err  error
}

// NewSchedulerSupplier returns a running supplier named name that creates,
// for each named aggregate on first access, a scheduler named "<name>-<aggregate name>"
// with the configured parallelism. Two contexts with the same aggregate name
// get two schedulers with the same name. It starts no goroutine. An empty
// name gives ErrInvalidName, a parallelism below 1 ErrInvalidParallelism.
// The caller owns the supplier and must stop it.
func NewSchedulerSupplier(name string, opts ...Option) (*Supplier, error) {
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
	o.logger = component.GuardLogger(cmp.Or(o.logger, slog.Default()))
	if o.factory == nil {
		logger := o.logger
		o.factory = func(name string, parallelism int) (schedulers.Scheduler, error) {
			return schedulers.NewParallel(name, parallelism, schedulers.WithLogger(logger))
		}
	}
	s := &Supplier{options: o, flights: map[MaterializedNamedAggregate]*flight{}, closing: make(chan struct{})}
	s.life.Init("supplier", name, ErrStopped, s.finish)
	s.life.Advance(component.StateNew, component.StateRunning) // a supplier serves from construction
	s.cache.Store(&cache{})
	return s, nil
}

// cache is an immutable map from key to scheduler. Readers load it without a
// lock; creation replaces it by a copy with one more entry. Named aggregates
// are few and created once, so copying is cheaper than any lock on the hot
// read path, and reads never write shared memory.
type cache map[MaterializedNamedAggregate]schedulers.Scheduler

// Name returns the name given to NewSchedulerSupplier.
func (s *Supplier) Name() string { return s.life.Name() }

// Done is closed once the supplier is stopped and every scheduler it created
// has terminated, and no factory call is in progress. After ForceStop it
// waits for tasks that ignore their context.
func (s *Supplier) Done() <-chan struct{} { return s.life.Done() }

// Err returns the joined errors (and recovered panics) of the disposals of
// the schedulers; meaningful once Done is closed.
func (s *Supplier) Err() error { return s.life.Err() }

// GetOrInitialize returns the scheduler of Materialize(named), creating it on
// first access with the factory, outside the supplier's lock; concurrent
// first calls for one named aggregate wait for that one creation and share
// its result, while other named aggregates are served meanwhile. A nil named
// gives ErrInvalidNamedAggregate. Once a stop has begun it returns an error
// wrapping ErrStopped and creates nothing; a caller waiting for a creation
// gets it at once, and the creator gets it when the factory returns, the
// scheduler created being disposed. A factory's error or panic (*PanicError)
// is returned wrapped to the creator and its waiters, and the next call tries
// again. A cached scheduler is returned without a lock.
func (s *Supplier) GetOrInitialize(named NamedAggregate) (schedulers.Scheduler, error) {
	if named == nil {
		return nil, fmt.Errorf("%w: nil, asked of supplier %q", ErrInvalidNamedAggregate, s.Name())
	}
	key := Materialize(named)
	if sch, ok := (*s.cache.Load())[key]; ok {
		// Every cached scheduler is in the terminal snapshot, so a hit that
		// races a stop still returns a scheduler that ends up disposed.
		return sch, nil
	}
	s.mu.Lock()
	if sch, ok := (*s.cache.Load())[key]; ok {
		s.mu.Unlock()
		return sch, nil
	}
	if s.closed {
		s.mu.Unlock()
		return nil, s.refuse()
	}
	if f, ok := s.flights[key]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.sch, f.err
		case <-s.closing:
			return nil, s.refuse()
		}
	}
	// The hold keeps Done open while the factory runs.
	if err := s.life.Enter("create a scheduler", component.StateRunning); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	s.mu.Unlock()
	defer s.life.Release()
	defer close(f.done)

	schedName := s.Name() + "-" + key.Aggregate
	sch, err := s.create(schedName)
	if err != nil {
		f.err = fmt.Errorf("aggregate: supplier %q creating scheduler %q for %s: %w", s.Name(), schedName, key, err)
	}
	s.mu.Lock()
	delete(s.flights, key)
	switch {
	case err != nil:
	case s.closed:
		s.mu.Unlock()
		// Not in the snapshot: dispose it here, and let Done wait for it.
		s.disposeNow(entry{schedName, sch})
		s.life.Go("disposal", func() error { s.await([]entry{{schedName, sch}}); return nil }) // cannot fail: this call holds
		f.err = s.refuse()
		return nil, f.err
	default:
		old := *s.cache.Load()
		next := make(cache, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		next[key] = sch
		s.cache.Store(&next)
		s.created = append(s.created, entry{schedName, sch})
		f.sch = sch
	}
	s.mu.Unlock()
	if err == nil {
		s.logger.Debug("aggregate: scheduler created", "supplier", s.Name(), "scheduler", schedName, "named_aggregate", key.String(), "parallelism", s.parallelism)
	}
	return f.sch, f.err
}

// refuse is the error of a creation refused after a stop began.
func (s *Supplier) refuse() error { return s.life.Refuse("create a scheduler") }

func (s *Supplier) create(name string) (sch schedulers.Scheduler, err error) {
	err = guard(func() error {
		sch, err = s.factory(name, s.parallelism)
		if err == nil && sch == nil {
			err = errors.New("factory returned a nil scheduler")
		}
		return err
	})
	return sch, err
}

// StopGracefully closes creation and disposes every scheduler created,
// gracefully: each runs what it has queued. It returns Err() once Done is
// closed: nil, or the joined disposal errors. If ctx ends first it returns
// ctx.Err() and the disposal goes on; a later call waits again for the same
// result. The disposal is shared: only the first stop begins one, and a
// StopGracefully after ForceStop only waits.
func (s *Supplier) StopGracefully(ctx context.Context) error {
	s.life.Quiesce()
	s.close()
	return s.life.Await(ctx, nil)
}

// ForceStop closes creation and disposes every scheduler at once, dropping
// queued tasks and cancelling the contexts of running ones; it takes over a
// graceful disposal in progress. It returns without waiting, also while a
// factory call is in progress; Done tells when the schedulers' goroutines
// exited, and pending StopGracefully calls then return. A panic of a
// scheduler's Dispose is logged and joined into Err; the others are disposed
// all the same. Idempotent.
func (s *Supplier) ForceStop() {
	if !s.life.Hold() {
		return // Done is closed: everything was disposed
	}
	defer s.life.Release()
	if _, first := s.life.Force(); !first {
		return
	}
	for _, e := range s.close() {
		s.disposeNow(e)
	}
}

// close closes creation once and returns the terminal snapshot: every
// scheduler created, the same slice for every call. The call that closes
// starts the goroutine that disposes the snapshot gracefully, or after a
// ForceStop only waits for it, and then reaches the logical end.
func (s *Supplier) close() []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closing)
		s.snapshot = s.created
		s.created = nil
		s.cache.Store(&cache{})
		s.life.Go("disposal", func() error { // cannot fail: the supplier is not stopped yet, or the caller holds
			s.await(s.snapshot)
			s.life.Stop()
			return nil
		})
	}
	return s.snapshot
}

// await waits, on a goroutine holding the supplier, until every scheduler of
// es has terminated: DisposeGracefully disposes a scheduler still running and
// waits for one already disposed. One whose DisposeGracefully panics is
// disposed at once and not waited for.
func (s *Supplier) await(es []entry) {
	component.GoEach(len(es), func(i int) error {
		e := es[i]
		err := guard(func() error { return e.sch.DisposeGracefully(context.Background()) })
		if err != nil {
			s.fail(fmt.Errorf("aggregate: supplier %q disposing scheduler %q: %w", s.Name(), e.name, err))
			if _, panicked := err.(*PanicError); panicked {
				s.disposeNow(e)
			}
		}
		return nil
	})
}

// disposeNow disposes e at once; a panic is logged and kept for Err.
func (s *Supplier) disposeNow(e entry) {
	if err := guard(func() error { e.sch.Dispose(); return nil }); err != nil {
		s.logger.Error("aggregate: scheduler dispose panicked", "supplier", s.Name(), "scheduler", e.name, "error", err)
		s.fail(fmt.Errorf("aggregate: supplier %q disposing scheduler %q at once: %w", s.Name(), e.name, err))
	}
}

// fail keeps err for Err.
func (s *Supplier) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// finish runs once, at the physical end, just before Done closes.
func (s *Supplier) finish() {
	s.mu.Lock()
	err := errors.Join(s.errs...)
	s.mu.Unlock()
	s.life.Record(err)
}

// guard returns f's error, or f's panic as a *PanicError: user code never
// kills the goroutine that calls it, nor leaves the supplier's lock held.
func guard(f func() error) error { return component.Call(f, nil) }
