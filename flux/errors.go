package flux

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidArgument is the error signal of a Flux assembled with an
	// invalid argument: a nil function, or a prefetch, concurrency, group count
	// or size below its minimum. The Flux reports it on subscribe.
	ErrInvalidArgument = errors.New("flux: invalid argument")
	// ErrTypeMismatch is the error signal of FromObservable when the rxgo
	// Observable emits an item that is not of the Flux's element type.
	ErrTypeMismatch = errors.New("flux: type mismatch")
	// ErrGroupKeyOutOfRange is the error signal of GroupBy when the key
	// function returns a key outside [0, groups).
	ErrGroupKeyOutOfRange = errors.New("flux: group key out of range")
	// ErrUnicastGroup is the error signal of a group flux of GroupBy
	// subscribed a second time: a group has exactly one subscriber.
	ErrUnicastGroup = errors.New("flux: group allows only one subscriber")
	// ErrCancelled is the reason given to discard hooks and to group
	// subscribers when a flow ended because its downstream cancelled (for
	// example Take was satisfied) rather than because of an error.
	ErrCancelled = errors.New("flux: cancelled")
	// ErrStalled is the error signal of a GroupBy flow that can never move
	// again, instead of hanging: the router waits for room
	// in a full group nobody has subscribed, and the operator that would
	// subscribe it (FlatMap at its concurrency, ConcatMap running an earlier
	// group) only waits for items of its own groups, which are behind the
	// router. The message names the full group and the groups waited for;
	// see GroupBy for the exact rule.
	ErrStalled = errors.New("flux: stalled")
	// ErrNotDelivered is wrapped, with the reason, by the error Sink.Next
	// returns for an item that never reached the downstream: the subscriber
	// was already gone, or the Create function had returned. The item is
	// still the caller's. Any other error from Next is the downstream's, for
	// an item it was handed.
	ErrNotDelivered = errors.New("flux: not delivered")
	// ErrTimeout is wrapped by the error signal of Timeout when no item, or
	// no terminal signal, arrived within its duration, and is the reason given to the discard hook for
	// an item that lost the race with the timeout.
	ErrTimeout = errors.New("flux: timeout")
	// ErrSkipped is the reason given to the discard hook for an item an
	// operator drops by design: an item of Sample replaced by a later one
	// within the same period.
	ErrSkipped = errors.New("flux: skipped")
	// ErrRetriesExhausted is wrapped, with the last error of the upstream,
	// by the error signal of RetryWhen once its attempts or its backoff
	// schedule ran out.
	ErrRetriesExhausted = errors.New("flux: retries exhausted")
	// ErrUnicastSink is wrapped by the error of a second Subscribe to the
	// Flux of a unicast ManySink.
	ErrUnicastSink = errors.New("flux: unicast sink allows only one subscriber")
	// ErrUnicastSource is wrapped by the error of a Subscribe to a hot
	// source (FromChannel) while another subscription of it runs: the two
	// would split its items between them.
	ErrUnicastSource = errors.New("flux: source allows only one subscriber at a time")
	// ErrSinkOverflow is the reason given to a subscriber's discard hook for
	// an item a ManySink made with WithDropOldest dropped for it because it
	// lagged by the sink's capacity.
	ErrSinkOverflow = errors.New("flux: sink overflow")
	// ErrDuplicate is the reason given to the discard hook for an item that
	// Distinct or DistinctUntilChanged (and their By forms) filtered out.
	ErrDuplicate = errors.New("flux: duplicate")
	// ErrSuperseded is the reason given to the discard hook for an item that
	// a newer one replaced before it was used: a latest value of
	// CombineLatest overwritten before it took part in a combination, an
	// item of a SwitchMap inner that arrived after the switch to the next.
	ErrSuperseded = errors.New("flux: superseded")
)

// invalid returns the error of an invalid argument of operator op.
func invalid(op, what string) error {
	return fmt.Errorf("flux: %s: %s: %w", op, what, ErrInvalidArgument)
}

var (
	// ErrFiltered is the reason given to the discard hook for an item that
	// Filter rejected.
	ErrFiltered = errors.New("flux: filtered")
)

var (
	// ErrNoSuchElement is wrapped by the error signal of Last and Single over
	// an empty Flux and of ElementAt beyond its items.
	ErrNoSuchElement = errors.New("flux: no such element")
	// ErrTooManyElements is wrapped by the error signal of Single over a Flux
	// of two items or more, and is the reason given with them to the discard
	// hook.
	ErrTooManyElements = errors.New("flux: more than one element")
)

// ErrTooManyGroups is the error signal of GroupByKey when an item's key
// would open a group beyond its maxGroups live groups.
var ErrTooManyGroups = errors.New("flux: too many groups")

// ErrOverflow is wrapped by the error signal of OnBackpressureBuffer with
// OverflowError once its buffer was full (Reactor's
// Exceptions.failWithOverflow), and is the reason given to the discard hook
// for an item an OnBackpressure operator dropped because its consumer was
// behind.
var ErrOverflow = errors.New("flux: overflow")
