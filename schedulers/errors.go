package schedulers

import "errors"

var (
	// ErrRejected is returned by Schedule and NewWorker once disposal has
	// begun; the wrapping message names the scheduler.
	ErrRejected = errors.New("schedulers: rejected")
	// ErrInvalidParallelism is returned by NewParallel for parallelism < 1.
	ErrInvalidParallelism = errors.New("schedulers: parallelism must be at least 1")
	// ErrInvalidName is returned by the constructors for an empty name.
	ErrInvalidName = errors.New("schedulers: name must not be empty")
	// ErrNilTask is returned by Schedule for a nil Task.
	ErrNilTask = errors.New("schedulers: task must not be nil")
	// ErrDisposed is the cause of the task context's cancellation by Dispose.
	ErrDisposed = errors.New("schedulers: disposed")
)
