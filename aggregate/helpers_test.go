package aggregate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/schedulers"
)

// fakeScheduler records how it is disposed. Its graceful disposal ends only
// when finish is called, or when Dispose takes over, as a real scheduler's
// does when its last goroutine exits.
type fakeScheduler struct {
	name       string
	graceErr   error // returned by DisposeGracefully once finished
	gracePanic any   // panicked by DisposeGracefully when not nil
	disposePan any   // panicked by Dispose when not nil

	disposed atomic.Bool
	forced   atomic.Bool
	done     chan struct{}
	once     sync.Once
}

// Context is never cancelled: the tests of the supplier do not run tasks.
func (f *fakeScheduler) Context() context.Context { return context.Background() }

func newFake(name string) *fakeScheduler {
	return &fakeScheduler{name: name, done: make(chan struct{})}
}

func (f *fakeScheduler) Name() string                          { return f.name }
func (f *fakeScheduler) Schedule(schedulers.Task) error        { return schedulers.ErrRejected }
func (f *fakeScheduler) NewWorker() (schedulers.Worker, error) { return nil, schedulers.ErrRejected }
func (f *fakeScheduler) IsDisposed() bool                      { return f.disposed.Load() }
func (f *fakeScheduler) Done() <-chan struct{}                 { return f.done }
func (f *fakeScheduler) finish()                               { f.once.Do(func() { close(f.done) }) }

func (f *fakeScheduler) DisposeGracefully(ctx context.Context) error {
	f.disposed.Store(true)
	if f.gracePanic != nil {
		panic(f.gracePanic)
	}
	select {
	case <-f.done:
		return f.graceErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeScheduler) Dispose() {
	f.disposed.Store(true)
	f.forced.Store(true)
	f.finish()
	if f.disposePan != nil {
		panic(f.disposePan)
	}
}

// recorder is a SchedulerFactory that counts and keeps what it creates, over
// an inner factory; fail, when set, makes the next creations fail.
type recorder struct {
	inner   func(name string, parallelism int) (schedulers.Scheduler, error)
	mu      sync.Mutex
	created []schedulers.Scheduler
	names   []string
	sizes   []int
	fail    error
}

func fakes() *recorder {
	return &recorder{inner: func(name string, n int) (schedulers.Scheduler, error) { return newFake(name), nil }}
}

func parallels() *recorder {
	return &recorder{inner: func(name string, n int) (schedulers.Scheduler, error) { return schedulers.NewParallel(name, n) }}
}

func (r *recorder) factory(name string, parallelism int) (schedulers.Scheduler, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	s, err := r.inner(name, parallelism)
	if err == nil {
		r.created = append(r.created, s)
		r.names = append(r.names, name)
		r.sizes = append(r.sizes, parallelism)
	}
	return s, err
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.created)
}

func (r *recorder) all() []schedulers.Scheduler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schedulers.Scheduler(nil), r.created...)
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

var errBoom = errors.New("boom")
