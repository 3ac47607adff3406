package schedulers

import (
	"errors"

	"github.com/aggflow/aggflow/component"
)

var (
	// ErrRejected is returned by Schedule, NewWorker and Worker.Schedule once
	// disposal of the scheduler (or of the worker) has begun; the wrapping
	// message names the scheduler.
	ErrRejected = errors.New("schedulers: rejected")
	// ErrInvalidParallelism is returned by NewParallel for parallelism < 1
	// and by NewBoundedElastic for maxGoroutines < 1.
	ErrInvalidParallelism = errors.New("schedulers: parallelism must be at least 1")
	// ErrInvalidOption is returned by the constructors for an option they
	// cannot honour: WithTTL(d <= 0), or WithTTL on NewParallel.
	ErrInvalidOption = errors.New("schedulers: invalid option")
	// ErrInvalidName is returned by the constructors for an empty name, which
	// would leave goroutines and logs unattributable.
	ErrInvalidName = errors.New("schedulers: name must not be empty")
	// ErrNilTask is returned by Schedule and Worker.Schedule for a nil Task,
	// rather than failing later on a scheduler goroutine.
	ErrNilTask = errors.New("schedulers: task must not be nil")
	// ErrGoexit is the Value of the *PanicError reported to the panic hook
	// when a task calls runtime.Goexit (t.FailNow in a test, for instance).
	// The goroutine cannot survive that; another takes its place and the
	// worker's next tasks still run, in order. It is component.ErrGoexit,
	// which every layer reports a Goexit with.
	ErrGoexit = component.ErrGoexit
	// ErrDisposed is the cause (context.Cause) of the cancellation of the
	// task context by Dispose.
	ErrDisposed = errors.New("schedulers: disposed")
	// ErrTerminated is the cause (context.Cause) of the cancellation of the
	// task context when a graceful disposal ends (the last goroutine
	// exited), so that no task context, nor any goroutine a task handed it
	// to, outlives the scheduler. After Dispose the cause is ErrDisposed.
	ErrTerminated = errors.New("schedulers: terminated")
)
