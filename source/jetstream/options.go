package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
)

// Subscription is what a Consumer reads: the partitions Owned of the
// stream Topology describes, through JetStream (kafka.Subscription's
// counterpart).
type Subscription struct {
	// JetStream is borrowed: its connection is the caller's to close after
	// Done (Connect makes both).
	JetStream natsjs.JetStream
	// Topology is the stream and its N partition subjects; Prepare checks
	// them against the server.
	Topology Topology
	// Owned is the static assignment: the partitions this process reads,
	// each in [0, N), once, each under a lease (WithStaticLease), so that
	// no other process reads it meanwhile. It is nil with
	// WithDynamicAssignment, whose members claim the partitions.
	Owned []int32
}

// Codec turns messages into exchanges. Decode gets a message's KeyHeader,
// never empty (the aggregate id, which ID must give back for the exchange),
// and the message; an error or a panic of Decode rejects the message (see
// WithRejected). ID returns an exchange's aggregate id, which picks its
// group inside the partition (partition.GroupKey). Both are called from the
// partition's fetching goroutine, one message at a time, so a slow decoder
// slows its partition. The counterpart of kafka.Codec.
type Codec[T any] struct {
	Decode func(key string, msg natsjs.Msg) (T, error)
	ID     func(T) string
}

// Defaults of the options.
const (
	// DefaultFetchBatch is the most messages a partition pulls ahead of its
	// handlers (capped by the partition's pending budget).
	DefaultFetchBatch = 256
	// DefaultAckWait is the durable consumers' AckWait: long, because the
	// consumer never lets the server redeliver (a redelivery would come
	// after newer exchanges of the same aggregate); it resets instead.
	DefaultAckWait = time.Hour
	// DefaultRequestTimeout bounds each request the consumer makes to the
	// server itself: stream and consumer info, consumer reset, the
	// confirmed acknowledgement of a revocation.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultServerLossTimeout is how long a partition whose pull failed
	// (the server restarted, the connection broke) waits for the server to
	// come back before the consumer fails.
	DefaultServerLossTimeout = time.Minute
)

// Option configures NewConsumer. No option involves the exchange type, so
// none takes a type argument. A nil Option is ignored.
type Option func(*config)

// RejectFunc decides about a message the consumer cannot hand to the
// handler: err wraps ErrMissingKey or ErrDecode. It runs on the partition's
// fetching goroutine, before anything later in the partition is delivered.
// Returning nil settles the message: its position counts as finished (as a
// handler's error does by default), so the partition acknowledges past it; park it
// first (republish it to a dead-letter subject) if it must not be lost.
// Returning an error stops the consumer with it: the message and everything
// after it in its partition stay unacknowledged. A panic counts as an error.
type RejectFunc func(ctx context.Context, msg natsjs.Msg, err error) error

type config struct {
	finishedMap                      bool // WithFinishedMap
	maxPending, batch, maxAckPending int
	maxHeld                          int
	maxHeldBytes                     int64
	ackWait, timeout, serverWait     time.Duration
	durable                          string
	reject                           RejectFunc
	logger                           *slog.Logger
	partition                        []partition.Option
	failing                          *failing
	noReset                          bool                                  // the control of the tests: resume as the server redelivers
	racingPull                       bool                                  // the tests': a client deadline on each pull, which drops what races it
	openFault                        func(p int32) error                   // the tests': the open of a partition fails with it
	wrapPulls                        func(natsjs.Consumer) natsjs.Consumer // the tests': a partition pulls through it

	member  string        // this process's member name
	ttl     time.Duration // the leases' TTL
	wait    time.Duration // static assignment: how long a partition another member holds is waited for
	assign  bool          // a dynamic assignment: the members share the partitions
	static  bool          // WithStaticLease was given
	noFence bool          // the control of the tests: leases never lapse locally, refused pulls ignored
}

// dynamic reports whether the partitions are claimed by the balance rather
// than given (Subscription.Owned).
func (c *config) dynamic() bool { return c.assign }

// WithMaxPending sets each partition's pending budget: at most n exchanges
// delivered and not finished (default dispatch.DefaultMaxPending). It also
// caps the fetch batch. The exchanges pending are a part of those held
// (WithMaxHeld): at most the smaller of the two.
func WithMaxPending(n int) Option { return func(c *config) { c.maxPending = n } }

// WithMaxHeld sets each partition's bound above its acknowledged prefix:
// at most records messages held, delivered and not acknowledged (finished
// or not), and bytes of their data (0: records only), by default
// partition.DefaultMaxHeldRecords and partition.DefaultMaxHeldBytes. A
// partition asks each pull for at most what the bound has room for, and
// pulls nothing once it is reached, until what it holds fell to half; the
// other partitions go on. So a stuck exchange keeps at most the bound
// (plus one message over the bytes limit) of the messages after it, and
// the server's MaxAckPending (derived: the bound plus one fetch batch) is
// never what stops the partition. Invalid values return ErrInvalidArgument.
func WithMaxHeld(records int, bytes int64) Option {
	return func(c *config) { c.maxHeld, c.maxHeldBytes = records, bytes }
}

// WithFinishedMap keeps each partition's finished map beside its ack floor
// (partition.FinishedMap, in the KV bucket "<durable>-finished", see the
// package doc), so that a crash replays only what had not finished: a
// partition held below a slow exchange writes it, at most every 25 ms, and
// a partition opened skips what it records (Stats.Skipped). Off by
// default: not yet proven across a server restart (docs/scale-out.md).
func WithFinishedMap() Option { return func(c *config) { c.finishedMap = true } }

// WithFetchBatch sets how many messages a partition pulls ahead of its
// handlers (default DefaultFetchBatch, at most the pending budget).
func WithFetchBatch(n int) Option { return func(c *config) { c.batch = n } }

// WithAckWait sets the durable consumers' AckWait (default DefaultAckWait).
// Keep it above the longest time an exchange may stay unacknowledged (its
// handler's time plus every exchange before it in its partition): a server
// that redelivers by timeout sends again what is still being handled; the
// consumer drops those redeliveries (Stats.Duplicates).
func WithAckWait(d time.Duration) Option { return func(c *config) { c.ackWait = d } }

// WithMaxAckPending sets the durable consumers' MaxAckPending (default the
// bound held, WithMaxHeld, plus the fetch batch): the positions delivered
// and not acknowledged, which include the finished ones above the prefix.
// Below the bound the server stops the partition before the bound does;
// below both the pending budget and the bound, it is ErrInvalidArgument.
func WithMaxAckPending(n int) Option { return func(c *config) { c.maxAckPending = n } }

// WithDurable sets the prefix of the durable consumers' names: partition p
// is read by "<durable>-<p>" (default the consumer's name). Every process
// that may own a partition uses the same prefix.
func WithDurable(prefix string) Option { return func(c *config) { c.durable = prefix } }

// WithRequestTimeout bounds each request the consumer makes itself (default
// DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithServerLossTimeout sets how long a partition whose pull failed or
// whose connection broke waits for the server before the consumer fails
// with ErrUnreachable (default DefaultServerLossTimeout). Meanwhile the
// connection reconnects by itself (see Connect) and the partition, reset,
// replays from its ack floor once the server answers. It counts from the
// reset, whose release of the partition comes first (its drain and the
// confirmation of its settled prefix, each within the request timeout):
// the consumer fails after the longer of the two.
func WithServerLossTimeout(d time.Duration) Option {
	return func(c *config) { c.serverWait = d }
}

// WithRejected sets what happens to a message without KeyHeader or that the
// decoder refused. By default (nil) the consumer stops with the error,
// having acknowledged only what came before the message in its partition:
// a message that names no aggregate is never skipped silently.
func WithRejected(f RejectFunc) Option { return func(c *config) { c.reject = f } }

// WithLogger sets the logger of the consumer and its partitions (default
// slog.Default()). A panic of its handler costs the line it was writing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPartitionOptions passes options to the partition.Dispatcher: groups
// per partition, the force grace, dispatch options (observers, outcome
// hooks). Its pending budget and logger are the consumer's to set.
func WithPartitionOptions(opts ...partition.Option) Option {
	return func(c *config) { c.partition = append(c.partition, opts...) }
}

// WithDynamicAssignment makes the consumer claim its partitions instead of
// being given them (Subscription.Owned is then nil): every process of the
// same durable prefix is a member named member (unique among them), and
// the members share the N partitions through leases of TTL ttl (at least
// MinLeaseTTL) in the KV bucket "<durable>-leases", created with that TTL
// if missing (an existing one with another TTL is ErrLeaseBucket). Each
// member aims at ceil(N/members) partitions: it releases what is above
// (gracefully: drained, acknowledged, then the lease deleted) and claims
// free ones; a crashed member's partitions are claimed once its leases
// expired, about ttl after its last renewal. The durable consumers use the
// pinned-client priority policy, and an owner stops handling and
// acknowledging when its lease passes by its own clock (the fence: see the
// package doc). Renewals are every ttl/4; the local lease ends ttl/5 before
// the server's. Costs per member: a renewal per owned partition, a member
// write and a listing of the bucket every ttl/4.
func WithDynamicAssignment(member string, ttl time.Duration) Option {
	return func(c *config) { c.member, c.ttl, c.assign = member, ttl, true }
}

// DefaultStaticLeaseTTL is the TTL of a static assignment's leases: a
// process killed (kill -9) and restarted gets its partitions back once its
// old leases expired, within about this long; an owner whose renewals stall
// longer than 4/5 of it (a pause, a lost network) loses its partitions and
// fails. A longer TTL rides out longer stalls and delays the restart as
// much.
const DefaultStaticLeaseTTL = 5 * time.Second

// WithStaticLease sets how a static assignment keeps its partitions
// exclusive. Each owned partition is claimed as WithDynamicAssignment's are:
// a lease in the KV bucket "<durable>-leases" held by member, of TTL ttl (at
// least MinLeaseTTL), renewed every ttl/4, fenced by the owner's clock and
// the durable consumer's pin (see the package doc); the handlers' ctx
// carries it (LeaseOf). A partition another member holds is waited for up to
// wait (its holder may have crashed: its lease expires within the TTL), then
// the consumer fails with ErrOwned naming the partition and its holder. An
// owner that loses a partition (its lease passed, another member holds it
// now) fails with ErrLeaseLost: a static assignment is not handed around.
// Zero values take the defaults: member "<name>-<host>-<pid>-<random>",
// unique per process; ttl DefaultStaticLeaseTTL; wait twice the TTL. A
// member name given must be unique among the live processes; a restarted
// process may take its old one again (its old leases expire within the wait,
// if the wait is longer than the TTL). The members of a durable prefix share
// the bucket, so they must agree on the TTL (ErrLeaseBucket). Costs: a
// renewal per owned partition every ttl/4.
func WithStaticLease(member string, ttl, wait time.Duration) Option {
	return func(c *config) { c.member, c.ttl, c.wait, c.static = member, ttl, wait, true }
}

func newConfig(name string, opts []Option) (config, error) {
	c := config{maxPending: dispatch.DefaultMaxPending, batch: DefaultFetchBatch, ackWait: DefaultAckWait,
		maxHeld: partition.DefaultMaxHeldRecords, maxHeldBytes: partition.DefaultMaxHeldBytes,
		timeout: DefaultRequestTimeout, serverWait: DefaultServerLossTimeout, durable: name, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.maxPending < 1 || c.batch < 1:
		return c, fmt.Errorf("%w: pending budget %d and fetch batch %d must be at least 1", ErrInvalidArgument, c.maxPending, c.batch)
	case c.maxHeld < 1 || c.maxHeldBytes < 0:
		return c, fmt.Errorf("%w: max held %d records, %d bytes: at least 1 record, bytes not negative", ErrInvalidArgument, c.maxHeld, c.maxHeldBytes)
	case c.ackWait <= 0 || c.timeout <= 0 || c.serverWait <= 0:
		return c, fmt.Errorf("%w: ack wait %v, request timeout %v and server loss timeout %v must be positive",
			ErrInvalidArgument, c.ackWait, c.timeout, c.serverWait)
	case c.logger == nil:
		return c, fmt.Errorf("%w: nil logger", ErrInvalidArgument)
	case c.durable == "" || !validName(c.durable):
		return c, fmt.Errorf("%w: durable name %q", ErrInvalidArgument, c.durable)
	}
	c.logger = component.GuardLogger(c.logger) // a panicking log handler costs its line, not the goroutine logging
	if c.assign && c.static {
		return c, fmt.Errorf("%w: WithStaticLease with a dynamic assignment (WithDynamicAssignment names the member and the TTL)", ErrInvalidArgument)
	}
	if !c.assign {
		if c.member == "" {
			c.member = defaultMember(name)
		}
		if c.ttl == 0 {
			c.ttl = DefaultStaticLeaseTTL
		}
		if c.wait == 0 {
			c.wait = 2 * c.ttl
		}
	}
	switch {
	case !memberName.MatchString(c.member):
		return c, fmt.Errorf("%w: member name %q (letters, digits, '-', '_', '=')", ErrInvalidArgument, c.member)
	case c.ttl < MinLeaseTTL:
		return c, fmt.Errorf("%w: lease TTL %v below %v", ErrInvalidArgument, c.ttl, MinLeaseTTL)
	case c.wait < 0:
		return c, fmt.Errorf("%w: static lease wait %v is negative", ErrInvalidArgument, c.wait)
	case !bucketName.MatchString(leaseBucket(c.durable)):
		return c, fmt.Errorf("%w: durable name %q makes no bucket name", ErrInvalidArgument, c.durable)
	}
	c.batch = min(c.batch, c.maxPending, c.maxHeld)
	if c.maxAckPending == 0 {
		c.maxAckPending = c.maxHeld + c.batch
	}
	if held := min(c.maxPending, c.maxHeld); c.maxAckPending < held {
		return c, fmt.Errorf("%w: max ack pending %d below the pending budget %d and the bound held %d", ErrInvalidArgument,
			c.maxAckPending, c.maxPending, c.maxHeld)
	}
	return c, nil
}
