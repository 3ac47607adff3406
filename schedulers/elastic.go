package schedulers

import (
	"fmt"
	"runtime"
	"time"
)

// DefaultBoundedElasticSize is the default cap on the goroutines of a
// bounded elastic scheduler: 10 x runtime.GOMAXPROCS(0) at start-up, or the
// environment variable AGGFLOW_BOUNDED_ELASTIC_SIZE when it holds a positive
// integer.
var DefaultBoundedElasticSize = envPositive("AGGFLOW_BOUNDED_ELASTIC_SIZE", 10*runtime.GOMAXPROCS(0))

// DefaultTTL is how long a goroutine of a bounded elastic scheduler stays
// idle before it exits, unless WithTTL says otherwise.
const DefaultTTL = 60 * time.Second

// BoundedElastic is the scheduler returned by NewBoundedElastic. It is a
// Parallel scheduler whose idle goroutines exit: it implements Scheduler
// with the same contract (see the package doc), except that a goroutine
// idle for the TTL exits, so the count goes down to zero while nothing
// runs. All methods are safe for concurrent use. The zero value is not
// usable: build one with NewBoundedElastic.
type BoundedElastic struct{ engine }

var _ Scheduler = (*BoundedElastic)(nil)

// NewBoundedElastic returns a scheduler for blocking tasks (I/O, locks,
// calls to other services): up to maxGoroutines goroutines, each started
// when a task finds no idle goroutine (the constructor starts none), kept
// while busy and ended once idle for the TTL (WithTTL; DefaultTTL, 60 s, by
// default). When all maxGoroutines run tasks, new tasks wait in the queue,
// which is unbounded, and run as goroutines come free. Workers, ordering,
// task contexts, panics, Goexit and both disposals behave as on NewParallel,
// which it shares its implementation with; idle retirement costs no
// goroutine, only a timer per idle goroutine.
//
// It returns an error wrapping ErrInvalidName for an empty name,
// ErrInvalidParallelism for maxGoroutines < 1 and ErrInvalidOption for
// WithTTL(d <= 0). The caller owns the scheduler and must end it with
// DisposeGracefully or Dispose.
//
// The queue has no cap: bound what you submit. A worker is not pinned to one
// goroutine, and a goroutine retires exactly one TTL after it went idle.
func NewBoundedElastic(name string, maxGoroutines int, opts ...Option) (*BoundedElastic, error) {
	o, err := buildOptions(opts)
	ttl := DefaultTTL
	if o.ttlSet {
		ttl = o.ttl
	}
	s := &BoundedElastic{}
	if err := s.init(name, maxGoroutines, ttl, o, err); err != nil {
		return nil, err
	}
	return s, nil
}

// String returns boundedElastic("name",maxGoroutines=n,ttl=d).
func (s *BoundedElastic) String() string {
	return fmt.Sprintf("boundedElastic(%q,maxGoroutines=%d,ttl=%v)", s.name, s.n, s.ttl)
}
