package testkit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/dispatch"
)

// Tag is what a Recorder needs to know of an exchange: its ordering key (the
// aggregate id), its sequence number within that key in the order the source
// emits it, and the group the dispatcher puts it in.
type Tag struct {
	Key   string
	Seq   int
	Group int
}

// Call is one recorded handler invocation. Start and End are ticks of the
// Recorder's logical clock: one atomic counter shared by every call, so that
// Start of a call is greater than End of another exactly when it began after
// that one returned, whatever the wall clock's resolution (and under
// testing/synctest, where the wall clock does not move).
type Call struct {
	Tag
	Start, End int64
	Outcome    dispatch.Outcome
	Err        error
}

// Recorder wraps a handler and records every call: the handler test double
// behind PerKeyFIFO, GroupSerial and NoLoss. Handle is safe for concurrent
// use.
type Recorder[T any] struct {
	tag     func(T) Tag
	handler func(context.Context, T) error
	clock   atomic.Int64

	mu    sync.Mutex
	calls []Call
}

// NewRecorder returns a Recorder whose Handle calls handler and records the
// call under tag(exchange). handler may be nil (every call succeeds).
func NewRecorder[T any](tag func(T) Tag, handler func(context.Context, T) error) *Recorder[T] {
	return &Recorder[T]{tag: tag, handler: handler}
}

// Handle runs the wrapped handler and records the call; it has the shape of
// dispatch.Handler[T]. The outcome is classified as the dispatcher does:
// OutcomePanic when the handler panicked (the panic goes on up to the
// dispatcher; Err is then nil), OutcomeSuccess when it returned nil,
// OutcomeCancelled when it returned an error after ctx was cancelled, else
// OutcomeError.
func (r *Recorder[T]) Handle(ctx context.Context, x T) (err error) {
	c := Call{Tag: r.tag(x), Start: r.clock.Add(1), Outcome: dispatch.OutcomePanic}
	defer func() {
		c.End, c.Err = r.clock.Add(1), err
		if c.Outcome != dispatch.OutcomePanic {
			c.Outcome = outcomeOf(ctx, err)
		}
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
	}()
	if r.handler != nil {
		err = r.handler(ctx, x)
	}
	c.Outcome = dispatch.OutcomeSuccess // reached only when the handler returned
	return err
}

func outcomeOf(ctx context.Context, err error) dispatch.Outcome {
	switch {
	case err == nil:
		return dispatch.OutcomeSuccess
	case ctx.Err() != nil:
		return dispatch.OutcomeCancelled
	}
	return dispatch.OutcomeError
}

// Calls returns a copy of the calls recorded so far, in the order they ended.
func (r *Recorder[T]) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}
