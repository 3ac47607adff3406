package testkit

import (
	"context"
	"fmt"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/component"
)

// The time steps wait on the clock of the goroutine running the script:
// virtual inside a testing/synctest bubble, real outside (see Verifier).
// Their durations are added to the timeout of VerifyT, so a script that
// waits for hours needs no Timeout of its own.

// timed adds a time step of d, which must be above zero.
func (v *Verifier[T]) timed(kind stepKind, name, desc string, d time.Duration) *Verifier[T] {
	if d <= 0 {
		return v.invalid("%s(%v): not above zero", name, d)
	}
	v.waits += d
	return v.add(step[T]{kind: kind, desc: desc, d: d})
}

// ThenAwait lets d pass on the clock (a synctest bubble's clock moves by itself
// while everything in it waits). The Flux is not held meanwhile: the items it
// emits during the wait, up to 256, are taken at once and matched by the steps
// after it, as is its end; beyond 256 it waits in emit until the steps after
// the wait take them. In a bubble, what is due at d itself has arrived when the
// step ends.
func (v *Verifier[T]) ThenAwait(d time.Duration) *Verifier[T] {
	return v.timed(kindAwait, "ThenAwait", fmt.Sprintf("thenAwait(%v)", d), d)
}

// ExpectNoEvent expects no signal, neither an item nor the end, for d from
// the moment the steps before it are done. The window is [0, d): a signal
// exactly at d is the next step's, one at d - 1ns fails this one (in a
// bubble exactly; in real time the clock decides). No subscription signal
// comes before the items, so this step may be the script's first.
func (v *Verifier[T]) ExpectNoEvent(d time.Duration) *Verifier[T] {
	return v.timed(kindNoEvent, "ExpectNoEvent", fmt.Sprintf("no signal within %v", d), d)
}

// ExpectTimeout ends the script: the flow neither emits nor ends within d
// of the steps before it (the window of ExpectNoEvent), then it is
// cancelled and must end by that cancellation, as with ThenCancel.
func (v *Verifier[T]) ExpectTimeout(d time.Duration) *Verifier[T] {
	v.timed(kindNoEvent, "ExpectTimeout", fmt.Sprintf("no signal within %v, then cancel (ExpectTimeout)", d), d)
	return v.end(termCancel)
}

// sleep waits d, or until the caller's context ends (its cause).
func (r *run[T]) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		settleBubble()
		return nil
	case <-r.ctx.Done():
		return context.Cause(r.ctx)
	}
}

// settleBubble lets every other goroutine of the caller's synctest bubble
// run until it blocks, so that what the clock's move to now woke (a timer
// of the Flux due at the same instant as the script's) has happened. Outside
// a bubble synctest.Wait panics, and this does nothing.
func settleBubble() {
	_ = component.Call(func() error { synctest.Wait(); return nil }, nil)
}

// await runs ThenAwait: the items of the wait are taken at once, up to
// awaitBacklog.
func (r *run[T]) await(s *step[T]) error {
	r.m.setAccept(awaitBacklog)
	err := r.sleep(s.d)
	r.m.setAccept(0)
	if err != nil {
		return endedDuring(err, s.desc)
	}
	r.si++
	return nil
}

// endedDuring is the error of a time step cut short by the caller's context.
func endedDuring(cause error, desc string) error {
	return fmt.Errorf("%w: the context ended (%v) during %s", ErrExpectation, cause, desc)
}

// noEvent runs ExpectNoEvent: it fails on any signal in the first d - 1ns,
// then lets the last nanosecond pass without looking: the window is [0, d).
func (r *run[T]) noEvent(s *step[T]) error {
	r.m.settle(nil)
	t := time.NewTimer(s.d - time.Nanosecond)
	defer t.Stop()
	for passed := false; ; {
		if ev := r.m.front(); ev != nil {
			return expectation(ev.index, ev.String(), s.desc)
		}
		if passed {
			if err := r.sleep(time.Nanosecond); err != nil {
				return endedDuring(err, s.desc)
			}
			r.si++
			return nil
		}
		select {
		case <-r.m.wake:
		case <-t.C:
			settleBubble()
			passed = true
		case <-r.ctx.Done():
			return endedDuring(context.Cause(r.ctx), s.desc)
		}
	}
}
