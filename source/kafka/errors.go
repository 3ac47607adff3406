package kafka

import (
	"errors"

	"github.com/aggflow/aggflow/dispatch"
)

// Sentinel errors of the package. Every error the package returns or
// reports wraps one of these with %w, so callers compare with errors.Is.
var (
	// ErrInvalidArgument is returned by NewConsumer for an empty name, group
	// or topic, no seed broker, a nil named aggregate, scheduler, decoder, id
	// function or handler, or an option out of range; by Prepare for a
	// heartbeat interval too long for the session timeout, or a revoke
	// timeout plus commit timeout above the rebalance timeout.
	ErrInvalidArgument = errors.New("kafka: invalid argument")
	// ErrUnreachable is returned by Prepare when no seed broker answered
	// within the connect timeout; it wraps the last error seen.
	ErrUnreachable = errors.New("kafka: brokers unreachable")
	// ErrNoTopic is returned by Prepare when the brokers answered that the
	// topic does not exist.
	ErrNoTopic = errors.New("kafka: topic does not exist")
	// ErrNoKey is the reason a record without a key is discarded: the key
	// is the aggregate id, which picks the record's group.
	ErrNoKey = errors.New("kafka: record without a key")
	// ErrDecode is the reason a record whose key or value the decoder
	// refused (or panicked on) is discarded; it wraps the decoder's error.
	ErrDecode = errors.New("kafka: record does not decode")
	// ErrBadRecord wraps the bad-record hook's error when it stops the
	// consumer; Err returns it, with the reason the record was bad.
	ErrBadRecord = errors.New("kafka: bad record")
	// ErrIllegalState is returned by a lifecycle method called in a state
	// that does not allow it (Start before Prepare, Prepare twice); the
	// error is dispatch.ErrIllegalState too.
	ErrIllegalState = errors.New("kafka: illegal state")
	// ErrAssign is recorded when a partition the group gave this member
	// could not be assigned to its dispatcher: the consumer stops, since it
	// could not handle that partition's records (and must not commit past
	// them).
	ErrAssign = errors.New("kafka: partition not assigned")
	// ErrCommit wraps a commit the broker refused or that did not answer in
	// time. A periodic commit that fails is tried again on the next
	// progress. The final commit of a revoked partition is tried again with
	// backoff until the revoke's deadline; still refused, it becomes Err and
	// stops the consumer (the partition's next owner reads its records
	// again, in order). A refusal saying that the group moved on is not an
	// error: see Stats.Uncommitted.
	ErrCommit = errors.New("kafka: commit failed")
	// ErrRefused is Err when the broker refused a setting of the group
	// member for good (a session timeout outside the broker's
	// group.min/max.session.timeout.ms, the group's or the topic's
	// authorization, the group's max size, the balancers): the consumer
	// stops. It names the setting and wraps the broker's error
	// (kerr.InvalidSessionTimeout...). Transient errors are retried.
	ErrRefused = errors.New("kafka: setting refused by the broker")
	// ErrLeaseLost is the error of a record that was not handled because
	// its partition's lease had passed (see LeaseOf): its outcome is
	// cancelled and its offset never committed; the partition's next owner
	// handles it.
	ErrLeaseLost = errors.New("kafka: lease lost")
)

// PanicError is a panic recovered from user code: the decoder, the id
// function and the hooks, as well as (through package dispatch) the handler.
type PanicError = dispatch.PanicError
