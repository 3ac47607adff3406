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
// is closed, ForceStop is called, or ctx ends.
type fakeComponent struct {
	name       string
	log        *callLog
	prepareErr error
	startErr   error
	stopErr    error
	hold       chan struct{}
	onPrepare  func() // runs inside Prepare, after logging

	forceOnce sync.Once
	forced    chan struct{}
	doneOnce  sync.Once
	done      chan struct{}
}

func newFake(name string, log *callLog) *fakeComponent {
	return &fakeComponent{name: name, log: log, forced: make(chan struct{}), done: make(chan struct{})}
}

func (f *fakeComponent) Prepare(context.Context) error {
	f.log.add("prepare:" + f.name)
	if f.onPrepare != nil {
		f.onPrepare()
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
	select {
	case <-f.hold:
		f.end()
		return f.stopErr
	case <-f.forced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeComponent) end() { f.doneOnce.Do(func() { close(f.done) }) }

func (f *fakeComponent) ForceStop() {
	f.log.add("force:" + f.name)
	f.forceOnce.Do(func() { close(f.forced) })
	f.end()
}

// fakeSupplier is an aggregate.SchedulerSupplier that logs its stops as
// "supplier:graceful" and "supplier:force" and hands out Immediate.
type fakeSupplier struct {
	log *callLog
}

func (s *fakeSupplier) GetOrInitialize(named aggregate.NamedAggregate) (schedulers.Scheduler, error) {
	s.log.add("supplier:get:" + named.AggregateName())
	return schedulers.Immediate(), nil
}

func (s *fakeSupplier) StopGracefully(context.Context) error {
	s.log.add("supplier:graceful")
	return nil
}

func (s *fakeSupplier) ForceStop() { s.log.add("supplier:force") }

func (f *fakeComponent) Name() string { return f.name }

// Done is closed once a stop returned without its ctx ending, or by ForceStop.
func (f *fakeComponent) Done() <-chan struct{} { return f.done }

func (f *fakeComponent) Err() error { return nil }
