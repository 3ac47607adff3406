package component

import "errors"

// Sentinel errors of the lifecycle. Every error the package returns wraps
// one of these with %w, so callers compare with errors.Is; dispatch's
// sentinels of the same names are these.
var (
	// ErrIllegalState is returned by a lifecycle step called in a state that
	// does not allow it; the message names the component and its state.
	ErrIllegalState = errors.New("component: illegal state")
	// ErrStopped is returned when work or a lifecycle step is refused because
	// a stop has begun: Runtime.Prepare or Start after a stop, for instance.
	ErrStopped = errors.New("component: stopped")
	// ErrForceStopped is the cause of the contexts a force stop cancels.
	ErrForceStopped = errors.New("component: force stopped")
	// ErrShutdownTimeout is returned by a stop whose deadline passed: what
	// was left was forced, and the message names it.
	ErrShutdownTimeout = errors.New("component: shutdown timed out")
	// ErrInvalidArgument is returned by NewRuntime for an empty name, a nil
	// component or one registered twice.
	ErrInvalidArgument = errors.New("component: invalid argument")
	// ErrInvalidOption is returned by NewRuntime for an invalid option value:
	// a shutdown timeout that is not positive, a nil or repeated resource.
	ErrInvalidOption = errors.New("component: invalid option")
	// ErrGoexit is the Value of the *PanicError that stands for a call of
	// runtime.Goexit in user code (t.FailNow in a test, for instance): no
	// recover stops it, and the goroutine ends; the guards report it before
	// it does.
	ErrGoexit = errors.New("component: runtime.Goexit called")
)
