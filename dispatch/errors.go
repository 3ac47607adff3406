package dispatch

import (
	"errors"

	"github.com/aggflow/aggflow/component"
)

// Sentinel errors of the package. Every error returned by dispatch wraps one of
// these with %w, so callers compare with errors.Is. ErrStopped,
// ErrForceStopped, ErrIllegalState and ErrShutdownTimeout are package
// component's (the same values), so that one errors.Is target matches a
// dispatcher's and a Runtime's.
var (
	// ErrStopped is returned when work or a lifecycle step is refused because a
	// stop has begun: Runtime.Prepare or Start after a stop, a dispatcher's
	// Prepare that a stop overtook, a Mailbox push after Close, Emit once the
	// intake shut. It
	// is also the reason given to the discard hook and the outcome hook for an
	// exchange a source emitted after the intake shut.
	ErrStopped = component.ErrStopped
	// ErrForceStopped is the cause of the handler context's cancellation by
	// ForceStop and the reason given to the discard hook and Observer.Discarded
	// for every exchange dropped by ForceStop.
	ErrForceStopped = component.ErrForceStopped
	// ErrInvalidGroupKey fails one exchange whose NewKeyed key function returned
	// a key outside [0, parallelism) or panicked, or whose aggregate id is
	// empty, or whose AggregateID (AggregateKey under WithAggregateKey)
	// panicked; the dispatcher goes on.
	ErrInvalidGroupKey = errors.New("dispatch: invalid group key")
	// ErrIllegalState is returned by a lifecycle method called in a state that
	// does not allow it; the message names the component and its state.
	ErrIllegalState = component.ErrIllegalState
	// ErrInvalidParallelism is returned by New for a parallelism below 1.
	ErrInvalidParallelism = errors.New("dispatch: parallelism must be at least 1")
	// ErrInvalidOption is returned by the constructors for an invalid option
	// value: a pending budget below 1, a nil function or observer, an unknown
	// error policy, a stop or shutdown timeout that is not positive.
	ErrInvalidOption = errors.New("dispatch: invalid option")
	// ErrInvalidArgument is returned by the constructors for an empty name, a nil
	// handler, a nil component or one registered twice.
	ErrInvalidArgument = errors.New("dispatch: invalid argument")
	// ErrShutdownTimeout is returned by Runtime.StopGracefully when the shutdown
	// deadline expired and the remaining components were force-stopped.
	ErrShutdownTimeout = component.ErrShutdownTimeout
	// ErrUnknownAggregate is the discard reason of an exchange a MainDispatcher
	// received for a named aggregate it has no child for.
	ErrUnknownAggregate = errors.New("dispatch: unknown aggregate")
)

// ErrSubscribed is the error signal of a Mailbox's Flux subscribed while
// another subscription of the same Mailbox runs (one subscriber at a time
// keeps the push order), and of a Results' Flux subscribed a second time.
var ErrSubscribed = errors.New("dispatch: already subscribed")

// errIllegal is the dispatchers' own refusal sentinel, so that a refusal
// says "dispatch: illegal state"; it is ErrIllegalState too (Lifecycle.Init).
var errIllegal = errors.New("dispatch: illegal state")
