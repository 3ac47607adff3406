package testkit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
)

// DefaultTimeout bounds VerifyT unless Timeout sets another: real time
// normally, virtual time inside a testing/synctest bubble. Reactor's
// StepVerifier waits forever by default, a known trap for hanging tests.
const DefaultTimeout = 10 * time.Second

// Verifier is a script of expectations about the signals of one Flux, built
// with Verify and run with Verify or VerifyT: Reactor's StepVerifier
// (reactor-test StepVerifier.java). Each run subscribes the Flux afresh.
//
// Value steps (ExpectNext, ExpectNextCount, ExpectNextMatches,
// ThenConsumeWhile) are matched in order against the items; the script ends
// with exactly one terminal step (ExpectComplete, ExpectError, ExpectErrorIs
// or ThenCancel). Building a Verifier is not safe for concurrent use;
// running it is.
type Verifier[T any] struct {
	tb      testing.TB
	f       flux.Flux[T]
	steps   []step[T]
	term    terminal
	target  error
	timeout time.Duration
	misuse  error
}

type step[T any] struct {
	desc  string
	times int          // items this step takes; 0 for ThenConsumeWhile
	check func(T) bool // nil: any item
}

type terminal int

const (
	termNone terminal = iota
	termComplete
	termError
	termErrorIs
	termCancel
)

// errCancel is how ThenCancel stops the subscription.
var errCancel = errors.New("testkit: cancelled by ThenCancel")

// Verify starts a script for f; tb is failed by VerifyT.
func Verify[T any](tb testing.TB, f flux.Flux[T]) *Verifier[T] {
	return &Verifier[T]{tb: tb, f: f, timeout: DefaultTimeout}
}

func (v *Verifier[T]) add(s step[T]) *Verifier[T] {
	if v.term != termNone && v.misuse == nil {
		v.misuse = fmt.Errorf("testkit: step %q after the terminal step", s.desc)
	}
	v.steps = append(v.steps, s)
	return v
}

func (v *Verifier[T]) end(t terminal, target error) *Verifier[T] {
	if v.term != termNone && v.misuse == nil {
		v.misuse = errors.New("testkit: two terminal steps")
	}
	v.term, v.target = t, target
	return v
}

// ExpectNext expects the next items to equal vs, in order
// (reflect.DeepEqual).
func (v *Verifier[T]) ExpectNext(vs ...T) *Verifier[T] {
	for _, want := range vs {
		v.add(step[T]{desc: fmt.Sprintf("onNext(%#v)", want), times: 1,
			check: func(got T) bool { return reflect.DeepEqual(got, want) }})
	}
	return v
}

// ExpectNextCount expects n more items, whatever they are.
func (v *Verifier[T]) ExpectNextCount(n int) *Verifier[T] {
	if n <= 0 {
		return v
	}
	return v.add(step[T]{desc: fmt.Sprintf("%d more onNext", n), times: n})
}

// ExpectNextMatches expects one item for which pred returns true.
func (v *Verifier[T]) ExpectNextMatches(pred func(T) bool) *Verifier[T] {
	return v.add(step[T]{desc: "onNext matching the predicate", times: 1, check: pred})
}

// ThenConsumeWhile consumes items while pred returns true (possibly none);
// the first item for which it returns false goes to the next step.
func (v *Verifier[T]) ThenConsumeWhile(pred func(T) bool) *Verifier[T] {
	return v.add(step[T]{desc: "onNext while the predicate holds", check: pred})
}

// ExpectComplete ends the script: the flow completes after the value steps.
func (v *Verifier[T]) ExpectComplete() *Verifier[T] { return v.end(termComplete, nil) }

// ExpectError ends the script: the flow fails, with any error.
func (v *Verifier[T]) ExpectError() *Verifier[T] { return v.end(termError, nil) }

// ExpectErrorIs ends the script: the flow fails with an error for which
// errors.Is(err, target) holds.
func (v *Verifier[T]) ExpectErrorIs(target error) *Verifier[T] {
	return v.end(termErrorIs, target)
}

// ThenCancel ends the script: once the value steps matched, the
// subscription is cancelled (at once if there are none) and must end
// without an error of its own.
func (v *Verifier[T]) ThenCancel() *Verifier[T] { return v.end(termCancel, nil) }

// Timeout replaces DefaultTimeout for VerifyT.
func (v *Verifier[T]) Timeout(d time.Duration) *Verifier[T] {
	v.timeout = d
	return v
}

// VerifyT runs the script with a context from tb.Context() bounded by the
// timeout, and fails tb (Fatal) with Verify's error. Call it from the test's
// goroutine.
func (v *Verifier[T]) VerifyT() {
	v.tb.Helper()
	ctx, cancel := context.WithTimeout(v.tb.Context(), v.timeout)
	defer cancel()
	if err := v.Verify(ctx); err != nil {
		v.tb.Fatal(err)
	}
}

// Verify subscribes the Flux with ctx and checks every signal against the
// script. It returns nil, or an error naming the first mismatching signal
// and its index (items count from 0; the terminal signal's index is the
// number of items before it), including the end of ctx while a step waits.
func (v *Verifier[T]) Verify(ctx context.Context) error {
	if v.misuse != nil {
		return v.misuse
	}
	if v.term == termNone {
		return errors.New("testkit: no terminal step (ExpectComplete, ExpectError, ExpectErrorIs or ThenCancel)")
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run[T]{v: v}
	if v.term == termCancel && r.exhausted() {
		cancel(errCancel)
	}
	err := v.f.Subscribe(sctx, r.next)
	return r.judge(ctx, err)
}

// run is the state of one Verify: the current step and how many items it
// still takes. next is called serially, by the flux contract.
type run[T any] struct {
	v        *Verifier[T]
	si, used int
	index    int
	mismatch error
}

// exhausted reports whether no value step needs another item.
func (r *run[T]) exhausted() bool {
	for i := r.si; i < len(r.v.steps); i++ {
		if r.v.steps[i].times > 0 {
			return false
		}
	}
	return true
}

func (r *run[T]) next(x T) error {
	i := r.index
	r.index++
	for r.si < len(r.v.steps) {
		s := r.v.steps[r.si]
		if s.times == 0 {
			if s.check(x) {
				return nil
			}
			r.si++
			continue
		}
		if s.check != nil && !s.check(x) {
			r.mismatch = fmt.Errorf("testkit: signal %d: got onNext(%#v), expected %s", i, x, s.desc)
			return r.mismatch
		}
		if r.used++; r.used == s.times {
			r.si, r.used = r.si+1, 0
		}
		if r.v.term == termCancel && r.exhausted() {
			return errCancel
		}
		return nil
	}
	if r.v.term == termCancel {
		return errCancel
	}
	r.mismatch = fmt.Errorf("testkit: signal %d: got onNext(%#v), expected %s", i, x, r.v.termDesc())
	return r.mismatch
}

func (r *run[T]) judge(ctx context.Context, err error) error {
	if r.mismatch != nil {
		return r.mismatch
	}
	got := "onComplete"
	if err != nil {
		got = fmt.Sprintf("onError(%v)", err)
	}
	if ctx.Err() != nil {
		got = fmt.Sprintf("no signal before the context ended (%v)", context.Cause(ctx))
	}
	for i := r.si; i < len(r.v.steps); i++ {
		if s := r.v.steps[i]; s.times > 0 {
			return fmt.Errorf("testkit: signal %d: got %s, expected %s", r.index, got, s.desc)
		}
	}
	ok := ctx.Err() == nil
	switch r.v.term {
	case termComplete:
		ok = ok && err == nil
	case termError:
		ok = ok && err != nil
	case termErrorIs:
		ok = ok && errors.Is(err, r.v.target)
	case termCancel:
		ok = ok && errors.Is(err, errCancel)
	}
	if !ok {
		return fmt.Errorf("testkit: signal %d: got %s, expected %s", r.index, got, r.v.termDesc())
	}
	return nil
}

func (v *Verifier[T]) termDesc() string {
	switch v.term {
	case termComplete:
		return "onComplete"
	case termError:
		return "onError"
	case termErrorIs:
		return fmt.Sprintf("onError matching %v", v.target)
	}
	return "cancel"
}
