package testkit

import "errors"

var (
	// ErrInvalidScript is wrapped by the error of a Verifier built wrongly:
	// no terminal step or two, a step after the terminal one, a nil
	// function, target or expected error, a duration not above zero, a
	// ConsumeRecordedWith with no RecordWith before it. Such a script fails
	// every run without subscribing the Flux.
	ErrInvalidScript = errors.New("testkit: invalid script")
	// ErrExpectation is wrapped by the error of a run whose Flux did not do
	// what the script expects (the message names the signal and the step),
	// and by the failures of Assertions.
	ErrExpectation = errors.New("testkit: expectation failed")
)
