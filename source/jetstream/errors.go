package jetstream

import (
	"errors"

	"github.com/aggflow/aggflow/dispatch"
)

// Sentinel errors of the package. Every error it returns wraps one of these
// (or a sentinel of package partition or dispatch, said where) with %w, so
// callers compare with errors.Is.
var (
	// ErrInvalidArgument is returned by Connect for a server URL that cannot
	// be parsed, and by NewConsumer and the topology helpers for an empty
	// name; a nil Subscription.JetStream, Codec.Decode,
	// Codec.ID, named aggregate, scheduler or handler; a topology without
	// stream, prefix or partitions; a Subscription.Owned partition out of
	// range or listed twice, none with a static assignment, or some with a
	// dynamic one; or an option out of range.
	ErrInvalidArgument = errors.New("jetstream: invalid argument")
	// ErrUnreachable is returned by Connect and Prepare when no server
	// answers, or the server has no JetStream, or a request got no answer
	// within the request timeout: it wraps the client's error. (A server
	// too old to answer is ErrServerVersion instead; a Prepare whose own ctx
	// ended wraps ctx's error, not this one.)
	ErrUnreachable = errors.New("jetstream: server unreachable")
	// ErrServerVersion is returned by Connect, NewConsumer and Prepare when
	// the server is older than MinServerVersion: it names the version found
	// and the one needed.
	ErrServerVersion = errors.New("jetstream: server version too old")
	// ErrStreamNotFound is returned by Prepare when the topology's stream
	// does not exist.
	ErrStreamNotFound = errors.New("jetstream: stream not found")
	// ErrSubjectsMismatch is returned by Prepare when the stream's subjects
	// are not exactly the topology's <prefix>.0 ... <prefix>.<N-1>: another
	// partition count, another prefix, or a wildcard whose partitions cannot
	// be counted.
	ErrSubjectsMismatch = errors.New("jetstream: stream subjects do not match the partitions")
	// ErrMissingKey is the reason given for a message without the KeyHeader
	// header: it names no aggregate, so it cannot be ordered. See
	// WithRejected for what happens to it.
	ErrMissingKey = errors.New("jetstream: message without the " + KeyHeader + " header")
	// ErrDecode is the reason given for a message the decoder refused (it
	// wraps the decoder's error) or panicked on (a *PanicError).
	ErrDecode = errors.New("jetstream: message cannot be decoded")
	// ErrRedelivered is no longer returned: a partition whose server
	// delivered a position at or below one delivered before, after a
	// delivery that did not reach it, resets instead (see the package doc).
	// Kept so that code comparing with it still builds.
	ErrRedelivered = errors.New("jetstream: server redelivered behind the consumer")
	// ErrIllegalState is returned by Prepare, Start and Revoke called in a
	// state that does not allow them.
	ErrIllegalState = errors.New("jetstream: illegal state")
	// ErrNotOwned is returned by Revoke for a partition the consumer does
	// not own (any more).
	ErrNotOwned = errors.New("jetstream: partition not owned")
	// ErrOwned is the failure of a static assignment one of whose
	// partitions another member still holds once the wait of
	// WithStaticLease is over (two processes given the same partitions): it
	// names the partition, the holder and this member.
	ErrOwned = errors.New("jetstream: partition owned by another member")
	// ErrLeaseBucket is returned by Prepare with a dynamic assignment when
	// the lease bucket exists with another TTL than the consumer's: the
	// members of one durable prefix must agree on it.
	ErrLeaseBucket = errors.New("jetstream: lease bucket mismatch")
	// ErrLeaseLost is the error of an exchange that was not handled because
	// its partition's lease had passed (its outcome is cancelled: the next
	// owner handles it), and the failure of a static assignment that lost a
	// partition another member holds now (it wraps ErrOwned then).
	ErrLeaseLost = errors.New("jetstream: lease lost")
)

// PanicError is a panic recovered from user code (a decoder, a reject hook):
// the value and the stack. It is dispatch's, so one errors.As target matches
// a panic from any layer of aggflow.
type PanicError = dispatch.PanicError

// errLeasePassed says a claim's lease passed before its partition was
// opened: nothing was reset, and the partition is claimed again later.
var errLeasePassed = errors.New("jetstream: the lease passed while claiming")
