package middleware

import "errors"

// Sentinel errors of the package. Every error the package returns or makes
// a handler return wraps one of these with %w, so callers compare with
// errors.Is; the one exception is a handler's own error that Retry or
// Timeout has nothing to add to (not retryable, or not late), which passes
// unchanged.
var (
	// ErrInvalidOption is returned by Retry, Timeout and DeadLetter for an
	// invalid option: a negative duration or count, a nil hook, policy or
	// predicate.
	ErrInvalidOption = errors.New("middleware: invalid option")
	// ErrInvalidArgument is the error of every call of a handler that Chain
	// (or a middleware of this package) built around a nil handler or a nil
	// middleware: the mistake shows in every outcome instead of as a panic.
	ErrInvalidArgument = errors.New("middleware: invalid argument")
	// ErrRetriesExhausted wraps the last error of a retried handler once its
	// retries ran out: the maximum number of attempts, the maximum elapsed
	// time or the backoff policy's backoff.Stop.
	ErrRetriesExhausted = errors.New("middleware: retries exhausted")
	// ErrRetryStopped wraps, with context.Cause of the handler's ctx and the
	// last attempt's error, the error of a retried handler whose ctx ended
	// while its retries went on: a ForceStop, or a Timeout around Retry.
	ErrRetryStopped = errors.New("middleware: retry stopped by its context")
	// ErrTimeout is the cause of the context Timeout gives each call, and
	// is wrapped, together with context.DeadlineExceeded, by the error of a
	// call that failed once its deadline had passed.
	ErrTimeout = errors.New("middleware: timeout")
	// ErrDeadLetter wraps the error of a DeadLetter hook that failed; the
	// handler then returns errors.Join(handler's error, that error).
	ErrDeadLetter = errors.New("middleware: dead letter hook failed")
)
