package partition

import "errors"

// Sentinel errors of the package. Every error returned by partition wraps one
// of these with %w, so callers compare with errors.Is.
var (
	// ErrOutOfOrder is returned by Tracker.Track for a position not above the
	// last one tracked (or below the position of the last Reset): a broker
	// delivers a partition in increasing positions, so this is a duplicate or
	// a binding's bug. The position is not tracked.
	ErrOutOfOrder = errors.New("partition: position out of order")
	// ErrUntracked is returned by Tracker.Finish and Tracker.Discard for a
	// position that is not tracked: never tracked (a gap), or forgotten by a
	// Reset. Nothing changes.
	ErrUntracked = errors.New("partition: position not tracked")
	// ErrEnded is returned by Tracker.Finish and Tracker.Discard for a
	// position that already ended: finished or discarded before, or at or
	// below the finished prefix (everything delivered there has finished).
	// Nothing changes.
	ErrEnded = errors.New("partition: position already ended")
	// ErrBroken is returned by Tracker.Track after Tracker.Break: the
	// binding missed a delivery, so nothing above the hole may be tracked
	// (and acknowledged) until a Reset. The position is not tracked.
	ErrBroken = errors.New("partition: continuity broken, reset first")
)

// Errors of Dispatcher.
var (
	// ErrInvalidArgument is returned by NewDispatcher for an empty name, a
	// nil named aggregate, scheduler, id function or handler, a group
	// count or budget below 1, or an invalid FailurePolicy (the error
	// names the field).
	ErrInvalidArgument = errors.New("partition: invalid argument")
	// ErrAssigned is returned by Dispatcher.Assign for a partition it owns
	// already.
	ErrAssigned = errors.New("partition: partition already assigned")
	// ErrNotAssigned is returned by Revoke and Lose for a partition the
	// Dispatcher does not own.
	ErrNotAssigned = errors.New("partition: partition not assigned")
	// ErrClosed is returned by Assign once Close began.
	ErrClosed = errors.New("partition: dispatcher closed")
	// ErrNotDrained is returned by Revoke and Lose when a handler of the
	// partition still ran after the force and its grace: it ignores its
	// context, and its exchange may run on after the partition was released.
	ErrNotDrained = errors.New("partition: handlers still running after the force")
)

// Errors of the failure policy.
var (
	// ErrHandlerFailed is wrapped, with the handler's error, by the error a
	// FailurePolicy that ends in Stop fails its consumer with.
	ErrHandlerFailed = errors.New("partition: handler failed (failure policy Stop)")
	// ErrDeadLettered is wrapped, with the handler's error, by the outcome
	// error of a delivery published as a dead letter (dispatch.Result.Err).
	ErrDeadLettered = errors.New("partition: dead-lettered")
)
