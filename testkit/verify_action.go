package testkit

import "fmt"

// The action steps run on the goroutine running the script, once the steps
// before them are done. While one runs, the items the Flux emits (fn may
// emit them itself, through a Sink) are taken at once and matched by the
// steps after it. A panic in fn fails the script with an error carrying
// *flux.PanicError; runtime.Goexit (t.FailNow) stops it after the
// subscription was stopped and joined.

// Then runs fn at this point of the script: to emit into a Sink or a channel
// the Flux reads, to move a fake clock, to check some state between signals.
func (v *Verifier[T]) Then(fn func()) *Verifier[T] {
	if fn == nil {
		return v.invalid("Then(nil)")
	}
	return v.add(step[T]{kind: kindThen, desc: "then", fn: fn})
}

// RecordWith starts recording the items the value steps after it take, in
// order, into a record new at each run, which the ConsumeRecordedWith and
// ExpectRecordedMatches after them read: with ThenConsumeWhile or
// ExpectNextCount, a way to check items whose order is not fixed. An item is
// recorded when a step takes it, not when it arrives, so that the record
// does not depend on how far the Flux ran ahead during an action. A later
// RecordWith starts a new record.
func (v *Verifier[T]) RecordWith() *Verifier[T] {
	v.records = true
	return v.add(step[T]{kind: kindRecord, desc: "recordWith"})
}

// ConsumeRecordedWith calls fn with a copy of the items recorded so far,
// typically to assert on them with the test's *testing.T. Without a
// RecordWith before it the script is invalid.
func (v *Verifier[T]) ConsumeRecordedWith(fn func(recorded []T)) *Verifier[T] {
	if fn == nil {
		return v.invalid("ConsumeRecordedWith(nil)")
	}
	return v.recorded("consumeRecordedWith", func(rec []T) error { fn(rec); return nil })
}

// ExpectRecordedMatches expects pred to return true for the items recorded
// so far. Without a RecordWith before it the script is invalid.
func (v *Verifier[T]) ExpectRecordedMatches(pred func(recorded []T) bool) *Verifier[T] {
	if pred == nil {
		return v.invalid("ExpectRecordedMatches(nil)")
	}
	return v.recorded("expectRecordedMatches", func(rec []T) error {
		if !pred(rec) {
			return fmt.Errorf("%w: recorded %#v do not match the predicate", ErrExpectation, rec)
		}
		return nil
	})
}

func (v *Verifier[T]) recorded(desc string, fn func([]T) error) *Verifier[T] {
	if !v.records {
		return v.invalid("%s without a RecordWith before it", desc)
	}
	return v.add(step[T]{kind: kindRecorded, desc: desc, recorded: fn})
}
