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
// normally, virtual time inside a testing/synctest bubble, so that a stalled
// flow fails the test rather than hanging it.
const DefaultTimeout = 10 * time.Second

// Verifier is a script of expectations about the signals of one Flux, built
// with Verify and run with Verify, VerifyT or VerifyThenAssertThat. Each run
// subscribes the Flux afresh, on a goroutine of its own that the run joins
// before it returns, and plays the script on the caller's goroutine, so
// functions given to the steps may use the test's *testing.T.
//
// Value steps (ExpectNext, ExpectNextCount, ExpectNextMatches,
// ThenConsumeWhile) are matched in order against the items; the Flux waits
// in each emit until its item is matched, as behind a slow subscriber, so
// nothing is pulled ahead of the script. Action steps (Then, RecordWith,
// ConsumeRecordedWith, ExpectRecordedMatches) and time steps (ThenAwait,
// ExpectNoEvent) run when the steps before them are done; while an action
// or a ThenAwait runs the Flux is not held, and what it emits (its end
// included) is kept, in order, for the steps after. The script ends with
// exactly one terminal step: ExpectComplete, ExpectError, ExpectErrorIs,
// ExpectErrorAs, ThenCancel or ExpectTimeout. A run costs one goroutine,
// and per item an allocation or two and a hand-over between goroutines.
//
// Time steps wait on the clock of the goroutine that runs the script. The
// verifier starts no testing/synctest bubble: run it inside the caller's
// (synctest.Test), with the Flux, its schedulers and timers created inside
// that bubble too, and hours of virtual time pass at once; outside a bubble
// the steps wait in real time.
//
// Building a Verifier is not safe for concurrent use; running it is, except
// with ExpectErrorAs, whose target each run writes.
type Verifier[T any] struct {
	tb      testing.TB
	f       flux.Flux[T]
	steps   []step[T]
	term    terminal
	target  error // ExpectErrorIs
	as      any   // ExpectErrorAs
	timeout time.Duration
	waits   time.Duration // the durations of the time steps, added to the timeout
	records bool          // a RecordWith came before
	misuse  error
}

type stepKind uint8

const (
	kindValue    stepKind = iota // times items; times 0: while check holds
	kindThen                     // run fn
	kindRecord                   // start a record
	kindRecorded                 // give the record to recorded
	kindAwait                    // wait d
	kindNoEvent                  // no signal within d
)

type step[T any] struct {
	kind     stepKind
	desc     string
	times    int
	check    func(T) bool // nil: any item
	fn       func()
	recorded func([]T) error
	d        time.Duration
}

type terminal uint8

const (
	termNone terminal = iota
	termComplete
	termError
	termErrorIs
	termErrorAs
	termCancel
)

// errCancel is how ThenCancel and ExpectTimeout stop the subscription.
var errCancel = errors.New("testkit: cancelled by the script")

// Verify starts a script for f; tb is failed by VerifyT and by the
// Assertions of a run.
func Verify[T any](tb testing.TB, f flux.Flux[T]) *Verifier[T] {
	return &Verifier[T]{tb: tb, f: f, timeout: DefaultTimeout}
}

// invalid records the first misuse of the builder.
func (v *Verifier[T]) invalid(format string, args ...any) *Verifier[T] {
	if v.misuse == nil {
		v.misuse = fmt.Errorf("%w: "+format, append([]any{ErrInvalidScript}, args...)...)
	}
	return v
}

func (v *Verifier[T]) add(s step[T]) *Verifier[T] {
	if v.term != termNone {
		v.invalid("step %q after the terminal step", s.desc)
	}
	v.steps = append(v.steps, s)
	return v
}

func (v *Verifier[T]) end(t terminal) *Verifier[T] {
	if v.term != termNone {
		v.invalid("two terminal steps")
	}
	v.term = t
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

// ExpectNextCount expects n more items, whatever they are; n 0 adds
// nothing, n < 0 makes the script invalid.
func (v *Verifier[T]) ExpectNextCount(n int) *Verifier[T] {
	switch {
	case n < 0:
		return v.invalid("ExpectNextCount(%d): negative count", n)
	case n == 0:
		return v
	}
	return v.add(step[T]{desc: fmt.Sprintf("%d more onNext", n), times: n})
}

// ExpectNextMatches expects one item for which pred returns true.
func (v *Verifier[T]) ExpectNextMatches(pred func(T) bool) *Verifier[T] {
	if pred == nil {
		return v.invalid("ExpectNextMatches(nil)")
	}
	return v.add(step[T]{desc: "onNext matching the predicate", times: 1, check: pred})
}

// ThenConsumeWhile consumes items while pred returns true (possibly none);
// the first item for which it returns false goes to the next step.
func (v *Verifier[T]) ThenConsumeWhile(pred func(T) bool) *Verifier[T] {
	if pred == nil {
		return v.invalid("ThenConsumeWhile(nil)")
	}
	return v.add(step[T]{desc: "onNext while the predicate holds", check: pred})
}

// ExpectComplete ends the script: the flow completes after the steps.
func (v *Verifier[T]) ExpectComplete() *Verifier[T] { return v.end(termComplete) }

// ExpectError ends the script: the flow fails, with any error.
func (v *Verifier[T]) ExpectError() *Verifier[T] { return v.end(termError) }

// ExpectErrorIs ends the script: the flow fails with an error for which
// errors.Is(err, target) holds. A nil target makes the script invalid: an
// error expectation needs an error.
func (v *Verifier[T]) ExpectErrorIs(target error) *Verifier[T] {
	if target == nil {
		v.invalid("ExpectErrorIs(nil): an error expectation needs a target error")
	}
	v.target = target
	return v.end(termErrorIs)
}

// errorType is the reflect type of the error interface.
var errorType = reflect.TypeFor[error]()

// ExpectErrorAs ends the script: the flow fails with an error for which
// errors.As(err, target) holds, which sets *target to it. target must be a
// non-nil pointer to an interface or to a type that implements error; anything
// else makes the script invalid where errors.As panics.
func (v *Verifier[T]) ExpectErrorAs(target any) *Verifier[T] {
	p := reflect.ValueOf(target)
	switch {
	case target == nil || p.Kind() != reflect.Pointer || p.IsNil():
		v.invalid("ExpectErrorAs(%T): the target must be a non-nil pointer", target)
	case p.Type().Elem().Kind() != reflect.Interface && !p.Type().Elem().Implements(errorType):
		v.invalid("ExpectErrorAs(%T): *target must be an interface or implement error", target)
	}
	v.as = target
	return v.end(termErrorAs)
}

// ThenCancel ends the script: once the steps before it are done (at once
// after the subscription if there are none), the subscription is cancelled.
// The flow must still be running then, and must end by that cancellation
// (Subscribe returning its cause): a flow that completed or failed before,
// or fails with another error after, fails the script.
func (v *Verifier[T]) ThenCancel() *Verifier[T] { return v.end(termCancel) }

// Timeout replaces DefaultTimeout for VerifyT: how long the script may wait
// for the Flux's signals, beyond its own time steps; d must be above zero.
func (v *Verifier[T]) Timeout(d time.Duration) *Verifier[T] {
	if d <= 0 {
		return v.invalid("Timeout(%v): not above zero", d)
	}
	v.timeout = d
	return v
}

// VerifyT runs the script with a context from tb.Context() bounded by the
// timeout plus the durations of the script's time steps, and fails tb
// (Fatal) with Verify's error. It returns the run's Assertions. Call it
// from the test's goroutine. A Flux that does not end once cancelled keeps
// it waiting: the run joins its subscription whatever happens.
func (v *Verifier[T]) VerifyT() *Assertions[T] {
	v.tb.Helper()
	ctx, cancel := context.WithTimeout(v.tb.Context(), v.timeout+v.waits)
	defer cancel()
	a, err := v.VerifyThenAssertThat(ctx)
	if err != nil {
		v.tb.Fatal(err)
	}
	return a
}

// Verify subscribes the Flux with ctx and checks every signal against the
// script. It returns nil, or an error naming the first mismatching signal
// and its index (items count from 0; the terminal signal's index is the
// number of items before it), including the end of ctx while a step waits.
// It wraps ErrExpectation, ErrInvalidScript, or *flux.PanicError when a
// function given to a step panicked.
func (v *Verifier[T]) Verify(ctx context.Context) error {
	_, err := v.VerifyThenAssertThat(ctx)
	return err
}

// VerifyThenAssertThat runs the script as Verify does and also returns what the
// run saw beyond its signals, for post-run checks. The Assertions are never
// nil; for an invalid script they are empty.
func (v *Verifier[T]) VerifyThenAssertThat(ctx context.Context) (*Assertions[T], error) {
	if v.misuse != nil {
		return &Assertions[T]{tb: v.tb}, v.misuse
	}
	if v.term == termNone {
		return &Assertions[T]{tb: v.tb}, fmt.Errorf("%w: no terminal step (ExpectComplete, ExpectError, ExpectErrorIs, ExpectErrorAs, ThenCancel or ExpectTimeout)", ErrInvalidScript)
	}
	return v.play(ctx)
}

// expectation is the error of a signal the script did not expect.
func expectation(index int, got, want string) error {
	return fmt.Errorf("%w: signal %d: got %s, expected %s", ErrExpectation, index, got, want)
}

func (v *Verifier[T]) termDesc() string {
	switch v.term {
	case termComplete:
		return "onComplete"
	case termError:
		return "onError"
	case termErrorIs:
		return fmt.Sprintf("onError matching %v", v.target)
	case termErrorAs:
		return fmt.Sprintf("onError as %v", reflect.TypeOf(v.as).Elem())
	}
	return "cancel"
}

// accepts reports whether err, the end of the flow, is what the terminal
// step expects; for ExpectErrorAs it sets the target.
func (v *Verifier[T]) accepts(err error) bool {
	switch v.term {
	case termComplete:
		return err == nil
	case termError:
		return err != nil
	case termErrorIs:
		return err != nil && errors.Is(err, v.target)
	case termErrorAs:
		return err != nil && errors.As(err, v.as)
	}
	return errors.Is(err, errCancel)
}
