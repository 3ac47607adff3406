package dispatch_test

import (
	"context"
	"sync"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
)

// callLog records lifecycle calls of several fakes in one global order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(call string) {
	l.mu.Lock()
	l.calls = append(l.calls, call)
	l.mu.Unlock()
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// fakeComponent is a Component that logs its calls as "<verb>:<name>". Its
// errors are configurable; when hold is set, StopGracefully blocks until hold
// is closed, ForceStop is called, or ctx ends (unless ignoreCtx), and
// Quiesce does not end it. onPrepare runs inside Prepare, after logging,
// with Prepare's ctx.
type fakeComponent struct {
	name       string
	log        *callLog
	prepareErr error
	startErr   error
	stopErr    error
	err        error // returned by Err
	hold       chan struct{}
	ignoreCtx  bool
	onPrepare  func(ctx context.Context)

	forceOnce sync.Once
	forced    chan struct{}
	doneOnce  sync.Once
	done      chan struct{}
}

func newFake(name string, log *callLog) *fakeComponent {
	return &fakeComponent{name: name, log: log, forced: make(chan struct{}), done: make(chan struct{})}
}

func (f *fakeComponent) Name() string { return f.name }

func (f *fakeComponent) Prepare(ctx context.Context) error {
	f.log.add("prepare:" + f.name)
	if f.onPrepare != nil {
		f.onPrepare(ctx)
	}
	return f.prepareErr
}

func (f *fakeComponent) Start() error {
	f.log.add("start:" + f.name)
	return f.startErr
}

func (f *fakeComponent) Quiesce() {
	f.log.add("quiesce:" + f.name)
	if f.hold == nil {
		f.end()
	}
}

func (f *fakeComponent) StopGracefully(ctx context.Context) error {
	f.log.add("stop:" + f.name)
	if f.hold == nil {
		f.end()
		return f.stopErr
	}
	ended := ctx.Done()
	if f.ignoreCtx {
		ended = nil
	}
	select {
	case <-f.hold:
		f.end()
		return f.stopErr
	case <-f.forced:
		return nil
	case <-ended:
		return ctx.Err()
	}
}

func (f *fakeComponent) ForceStop() {
	f.log.add("force:" + f.name)
	f.forceOnce.Do(func() { close(f.forced) })
	f.end()
}

func (f *fakeComponent) end() { f.doneOnce.Do(func() { close(f.done) }) }

// Done is closed once a stop returned without its ctx ending, by ForceStop,
// or by end.
func (f *fakeComponent) Done() <-chan struct{} { return f.done }

func (f *fakeComponent) Err() error { return f.err }

// fakeSupplier is a supplier and a component.Resource that logs its calls as
// "supplier:get:<aggregate>", "supplier:graceful" and "supplier:force",
// hands out Immediate, and is done after either stop.
type fakeSupplier struct {
	log *callLog

	once, closeOnce sync.Once
	done            chan struct{}
}

func (s *fakeSupplier) GetOrInitialize(named aggregate.NamedAggregate) (schedulers.Scheduler, error) {
	s.log.add("supplier:get:" + named.AggregateName())
	return schedulers.Immediate(), nil
}

func (s *fakeSupplier) StopGracefully(context.Context) error {
	s.stop("supplier:graceful")
	return nil
}

func (s *fakeSupplier) ForceStop() { s.stop("supplier:force") }

func (s *fakeSupplier) stop(call string) {
	s.log.add(call)
	s.Done()
	s.closeOnce.Do(func() { close(s.done) })
}

// Name names it in a Runtime's errors, as *aggregate.Supplier is.
func (s *fakeSupplier) Name() string { return "fakeSupplier" }

func (s *fakeSupplier) Done() <-chan struct{} {
	s.once.Do(func() { s.done = make(chan struct{}) })
	return s.done
}
