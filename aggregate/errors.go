package aggregate

import "errors"

var (
	// ErrStopped is returned by GetOrInitialize once StopGracefully or
	// ForceStop has begun, also to a caller whose creation was in progress;
	// the wrapping message names the supplier and its state.
	ErrStopped = errors.New("aggregate: scheduler supplier stopped")
	// ErrInvalidParallelism is returned by NewSchedulerSupplier when
	// WithParallelism was given a value below 1.
	ErrInvalidParallelism = errors.New("aggregate: parallelism must be at least 1")
	// ErrInvalidName is returned by NewSchedulerSupplier for an empty name.
	ErrInvalidName = errors.New("aggregate: name must not be empty")
	// ErrInvalidNamedAggregate is returned by ParseNamedAggregate when the
	// string has no context part and the default context is empty, and by
	// GetOrInitialize for a nil NamedAggregate.
	ErrInvalidNamedAggregate = errors.New("aggregate: invalid named aggregate")
)
