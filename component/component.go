package component

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Component is anything with the runtime lifecycle: dispatch's Dispatcher
// and MainDispatcher, a Runtime, a broker binding's consumer, or a user's
// own. The contract, which Runtime relies
// on, is the one of docs/lifecycle.md:
//
//   - construction starts nothing; Prepare readies the component without
//     processing; Start opens processing;
//   - Quiesce closes the intake promptly, without blocking, idempotently;
//   - StopGracefully quiesces, lets admitted work finish and returns nil (or
//     Err()) once every goroutine owned has exited, or an error wrapping
//     ctx's when ctx ends first (the stop goes on);
//   - ForceStop drops what has not started, cancels what runs and returns at
//     once; it is idempotent, safe before Prepare and concurrently with every
//     other method;
//   - Done closes when the component is stopped and every goroutine it owns
//     has exited; Err is the first error, meaningful once Done is closed.
type Component interface {
	Name() string
	Prepare(ctx context.Context) error
	Start() error
	Quiesce()
	StopGracefully(ctx context.Context) error
	ForceStop()
	Done() <-chan struct{}
	Err() error
}

// Run is the one-call lifecycle of c, shared by Runtime and the
// dispatchers: with ctx already done it starts nothing, stops c and returns
// ctx's cause; else prepare, start, wait until done; when ctx ends, stop gracefully
// within timeout, then force and wait for Done as long again. It returns
// the component's first error, or the error of a stop that had to be forced
// (wrapping ErrShutdownTimeout), once Done closed: nothing of c runs any
// more, no hook is called after it. Only a handler that ignores its
// cancelled ctx for the second timeout too makes it return before Done,
// with an error saying so and what still, if not nil, adds ("3 in
// flight"). timeout must be positive.
func Run(ctx context.Context, c Component, timeout time.Duration, still func() string) error {
	if err := ctx.Err(); err != nil {
		return forced(c, timeout, still, context.Cause(ctx)) // told to stop before it began: start nothing, end
	}
	if err := c.Prepare(ctx); err != nil {
		return forced(c, timeout, still, err)
	}
	if err := c.Start(); err != nil {
		return forced(c, timeout, still, err)
	}
	select {
	case <-c.Done():
		return c.Err()
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := c.StopGracefully(stopCtx)
	select {
	case <-c.Done():
		return err
	case <-stopCtx.Done():
	}
	if !errors.Is(err, ErrShutdownTimeout) { // else the component forced itself and said so
		err = errors.Join(fmt.Errorf("%w: %q forced after %v", ErrShutdownTimeout, c.Name(), timeout), err)
	}
	return forced(c, timeout, still, err)
}

// forced force-stops c and returns err once c is done, or after timeout
// with an error saying what still runs.
func forced(c Component, timeout time.Duration, still func() string, err error) error {
	c.ForceStop()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.Done():
		return err
	case <-timer.C:
	}
	left := ""
	if still != nil {
		left = " (" + still() + ")"
	}
	return errors.Join(err, fmt.Errorf("%w: %q: handlers still running %v after the force%s", ErrShutdownTimeout, c.Name(), timeout, left))
}

// markKey is the key of the chain of components a context was handed down
// by (Mark).
type markKey struct{}

type markChain struct {
	c     any
	outer *markChain
}

// Mark returns ctx marked as handed down by c, keeping the outer marks: the
// context a component gives its own work (a Runtime's to its components'
// Prepare, a dispatcher's to its handlers), so that a stop called with it
// from that work, which cannot wait for itself, knows (Marked). Cost: one
// context value.
func Mark(ctx context.Context, c any) context.Context {
	outer, _ := ctx.Value(markKey{}).(*markChain)
	return context.WithValue(ctx, markKey{}, &markChain{c, outer})
}

// Marked reports whether ctx, or a context it derives from, was marked by
// Mark as handed down by c. Cost: a walk of the chain of marks.
func Marked(ctx context.Context, c any) bool {
	for m, _ := ctx.Value(markKey{}).(*markChain); m != nil; m = m.outer {
		if m.c == c {
			return true
		}
	}
	return false
}
