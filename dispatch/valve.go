package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/flux"
)

// errIntakeClosed is the reason given for an exchange a source emits after
// the intake closed: it was refused, not handled.
var errIntakeClosed = fmt.Errorf("%w: intake closed", ErrStopped)

// errShut stops a source once the valve is shut; the stop is turned into
// completion.
var errShut = errors.New("dispatch: intake shut")

// valve is the intake of a pipeline: closed until opened (Start), so that
// the source is not subscribed before; shut for good by a stop (Quiesce,
// ForceStop), which cancels the source's context at once. Wow's
// DemandGateFlux (DemandGateFlux.kt), for a push-based source: instead of
// withholding demand it withholds the subscription.
type valve struct {
	mu     sync.Mutex
	gate   chan struct{} // closed by open or shut
	opened bool
	cancel context.CancelCauseFunc // the source's, once subscribed
	isShut atomic.Bool
}

func newValve() *valve { return &valve{gate: make(chan struct{})} }

// open lets the source be subscribed. Call at most once, before any shut.
func (v *valve) open() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.opened = true
	close(v.gate)
}

// shut closes the intake for good; idempotent.
func (v *valve) shut() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.isShut.Swap(true) {
		return
	}
	if !v.opened {
		close(v.gate)
	}
	if v.cancel != nil {
		v.cancel(errShut)
	}
}

// flow waits for the valve to open, then subscribes source with a context
// that shut cancels and passes each item to emit; an item the source emits
// after shut goes to refused instead, and the source is told to stop. It
// returns nil when the valve was shut first or the source completed, ctx's
// cause when ctx ended, else the source's error.
func flow[T any](v *valve, ctx context.Context, source flux.Flux[T], emit func(T) error, refused func(T)) error {
	select {
	case <-v.gate:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	v.mu.Lock()
	if v.isShut.Load() {
		v.mu.Unlock()
		return nil // shut before it opened: end empty
	}
	srcCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	v.cancel = cancel
	v.mu.Unlock()

	err := source.Subscribe(srcCtx, func(x T) error {
		if v.isShut.Load() {
			refused(x)
			return errShut
		}
		return emit(x)
	})
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case v.isShut.Load():
		return nil
	}
	return err
}
