package testkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/flux"
)

// errOver stops a subscription still running when the script is over.
var errOver = errors.New("testkit: verification over")

// run is one play of a script: the steps run on the caller's goroutine, the
// subscription on its own, and a mailbox between them.
type run[T any] struct {
	v      *Verifier[T]
	m      *mailbox[T]
	ctx    context.Context // the caller's: its end fails the waiting step
	cancel context.CancelCauseFunc
	si     int // the current step
	used   int // items the current step has taken
	record []T // the items taken since RecordWith; nil: none
}

// play subscribes the Flux and runs the script against it. Every path out,
// a panic or runtime.Goexit in a step's function included, stops the
// subscription and joins its goroutine before returning.
func (v *Verifier[T]) play(ctx context.Context) (a *Assertions[T], err error) {
	m := newMailbox[T]()
	sctx, cancel := context.WithCancelCause(ctx)
	// A ThenCancel with nothing before it cancels inside the subscription,
	// before the Flux starts: whatever the Flux does then, it does with its
	// context already cancelled.
	atOnce := len(v.steps) == 0 && v.term == termCancel
	f := flux.DoOnDiscard(flux.Defer(func() flux.Flux[T] {
		m.subscribed()
		if atOnce {
			m.refuse(errCancel)
			cancel(errCancel)
		}
		return v.f
	}), m.discard)
	done := make(chan struct{})
	component.Go(func() error { return f.Subscribe(sctx, m.emit) }, func(err error) {
		defer close(done)
		if p, ok := err.(*component.PanicError); !ok || p.Value != component.ErrGoexit {
			m.end(err) // unless the Flux called runtime.Goexit here: the run ends unfinished
		}
	})
	defer func() {
		m.refuse(errOver)
		cancel(errOver)
		<-done
		a = m.assertions(v.tb)
		if err == nil {
			err = m.broken()
		}
	}()
	r := &run[T]{v: v, m: m, ctx: ctx, cancel: cancel}
	return nil, r.script()
}

func (r *run[T]) script() error {
	ev, err := r.head()
	if err != nil {
		return r.fail(fmt.Errorf("%w: not subscribed before the context ended (%v)", ErrExpectation, err))
	}
	if ev.kind == evEnd {
		return r.fail(fmt.Errorf("%w: not subscribed: Subscribe returned %v", ErrExpectation, ev.err))
	}
	r.m.pop()
	for r.si < len(r.v.steps) {
		if err := r.step(&r.v.steps[r.si]); err != nil {
			return r.fail(err)
		}
	}
	if err := r.terminal(); err != nil {
		return r.fail(err)
	}
	return nil
}

// fail stops the subscription with err, which is also what the emitter
// waiting now, and any later one, is answered.
func (r *run[T]) fail(err error) error {
	r.m.refuse(err)
	r.cancel(err)
	return err
}

// head returns the oldest signal not consumed, waiting for one; before
// waiting it lets the emitter of the last item matched go on. Once the
// caller's context has ended it returns its cause: what the Flux does then
// (ending with that cause, most likely) is no longer the script's.
func (r *run[T]) head() (*event[T], error) {
	for {
		if r.ctx.Err() != nil {
			return nil, context.Cause(r.ctx)
		}
		if ev := r.m.front(); ev != nil {
			return ev, nil
		}
		r.m.settle(nil)
		select {
		case <-r.m.wake:
		case <-r.ctx.Done():
		}
	}
}

// waitingFor is the error of a step still waiting when the context ended.
func (r *run[T]) waitingFor(cause error, want string) error {
	return expectation(r.m.emitted(), fmt.Sprintf("no signal before the context ended (%v)", cause), want)
}

func (r *run[T]) step(s *step[T]) error {
	switch s.kind {
	case kindValue:
		return r.value(s)
	case kindThen:
		return r.action(s.desc, s.fn)
	case kindRecord:
		r.record = []T{}
		r.si++
		return nil
	case kindRecorded:
		var err error
		rec := append([]T{}, r.record...)
		if perr := r.action(s.desc, func() { err = s.recorded(rec) }); perr != nil {
			return perr
		}
		return err
	case kindAwait:
		return r.await(s)
	}
	return r.noEvent(s)
}

// value matches one signal against a value step.
func (r *run[T]) value(s *step[T]) error {
	ev, err := r.head()
	if err != nil {
		return r.waitingFor(err, s.desc)
	}
	if ev.kind == evEnd {
		if s.times == 0 { // the end of the items ends ThenConsumeWhile
			r.si++
			return nil
		}
		return expectation(ev.index, ev.String(), s.desc)
	}
	ok, err := matches(s, ev.item)
	if err != nil {
		return err
	}
	switch {
	case s.times == 0 && !ok: // the item goes to the next step
		r.si++
		return nil
	case !ok:
		return expectation(ev.index, ev.String(), s.desc)
	}
	r.take()
	if s.times > 0 {
		if r.used++; r.used == s.times {
			r.si, r.used = r.si+1, 0
		}
	}
	return nil
}

// take consumes the item at the head, recording it if a record is kept.
func (r *run[T]) take() {
	if ev := r.m.pop(); r.record != nil {
		r.record = append(r.record, ev.item)
	}
}

// action runs fn, taking every item emitted meanwhile (fn may emit them
// itself, through a Sink) for the steps after it.
func (r *run[T]) action(desc string, fn func()) error {
	r.m.setAccept(acceptAll)
	err := guard(desc, fn)
	r.m.setAccept(0)
	r.si++
	return err
}

// terminal checks the end of the flow against the terminal step.
func (r *run[T]) terminal() error {
	v := r.v
	if v.term == termCancel {
		return r.cancelled()
	}
	ev, err := r.head()
	if err != nil {
		return r.waitingFor(err, v.termDesc())
	}
	if ev.kind == evNext || !v.accepts(ev.err) {
		return expectation(ev.index, ev.String(), v.termDesc())
	}
	return nil
}

// cancelled cancels the subscription, which must still be running, and
// checks that it ends by the cancellation.
func (r *run[T]) cancelled() error {
	if !r.m.refusing() {
		if ev := r.m.endSeen(); ev != nil {
			return expectation(ev.index, ev.String(), "cancel")
		}
	}
	r.m.refuse(errCancel)
	r.cancel(errCancel)
	for {
		ev, err := r.head()
		if err != nil {
			return fmt.Errorf("%w: the flow had not ended after the cancel when the context ended (%v)", ErrExpectation, err)
		}
		if ev.kind == evEnd {
			if !errors.Is(ev.err, errCancel) {
				return expectation(ev.index, ev.String()+" after the cancel", "the cancellation")
			}
			return nil
		}
		r.m.pop() // taken before the cancel, and no longer expected
	}
}

// guard calls fn, turning its panic into an error carrying *flux.PanicError.
func guard(desc string, fn func()) (err error) {
	defer recovered(desc, &err)
	defer component.Catch(&err)
	fn()
	return nil
}

// matches reports whether x satisfies the value step s, guarded as guard
// does but without a closure per item.
func matches[T any](s *step[T], x T) (ok bool, err error) {
	if s.check == nil {
		return true, nil
	}
	defer recovered(s.desc, &err)
	defer component.Catch(&err)
	return s.check(x), nil
}

// recovered, deferred before component.Catch(err), names the step desc in
// the panic Catch put in *err (the only error there: the step returns none).
func recovered(desc string, err *error) {
	if *err != nil {
		*err = fmt.Errorf("testkit: %s: %w", desc, *err)
	}
}
