package dispatch

import (
	"context"
	"fmt"
	"sync"
)

// lifecycle is what Dispatcher and MainDispatcher share: the one-shot state
// machine of Wow's AggregateDispatcher (S-1.10.2) under one mutex, the intake
// valve, the cancel of the run context, the first error and the done
// channel.
type lifecycle struct {
	kind, name string // for messages: "dispatcher", "orders"
	valve      *valve

	mu        sync.Mutex
	state     State
	runCancel context.CancelCauseFunc // cancels the run context (ForceStop)
	forced    bool
	err       error
	done      chan struct{}
}

func newLifecycle(kind, name string) lifecycle {
	return lifecycle{kind: kind, name: name, valve: newValve(), done: make(chan struct{})}
}

// Name returns the name given to the constructor.
func (l *lifecycle) Name() string { return l.name }

// State returns the current lifecycle state.
func (l *lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Done is closed when the pipeline ended and every goroutine it owns (its
// own, an owned scheduler's or supplier's, a MainDispatcher's children's)
// has exited. After a ForceStop it waits for handlers that ignore their
// context.
func (l *lifecycle) Done() <-chan struct{} { return l.done }

// Err returns nil, the source's error, the error that broke the pipeline (a
// scheduler rejecting work while not force-stopped), or under StopOnError
// the first failure. Meaningful once Done is closed.
func (l *lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// record keeps the first error as Err().
func (l *lifecycle) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// illegal is the error of op refused in the current state; l.mu is held.
func (l *lifecycle) illegal(op string) error {
	return fmt.Errorf("%w: %s %q cannot %s from state %v", ErrIllegalState, l.kind, l.name, op, l.state)
}

// await waits for done (then returns Err()) or for ctx (ctx.Err()).
func (l *lifecycle) await(ctx context.Context) error {
	select {
	case <-l.done:
		return l.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitDone waits until every component of cs that has a Done method has
// closed it: the goroutines they own have exited.
func awaitDone(cs []Component) {
	for _, c := range cs {
		if d, ok := c.(interface{ Done() <-chan struct{} }); ok {
			<-d.Done()
		}
	}
}
