package kafka

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
)

// Subscription is what a Consumer reads: the seed brokers ("host:port"),
// the consumer group and the one topic the group consumes.
type Subscription struct {
	Brokers []string
	Group   string
	Topic   string
}

// Codec turns records into exchanges. Decode gets a record's key, never
// empty, and value; ID returns an exchange's aggregate id, which picks its
// group inside the partition (partition.GroupKey). Both are called from the
// poll loop, one record at a time, so a slow decoder slows every partition.
type Codec[T any] struct {
	Decode func(key, value []byte) (T, error)
	ID     func(T) string
}

// BadRecordHook decides what happens to a record that cannot be handled:
// reason wraps ErrNoKey or ErrDecode. Returning nil discards the record for
// good (its offset is committed past, as if handled); returning an error
// stops the consumer, with Err wrapping ErrBadRecord, before any later
// record of the partition is delivered.
type BadRecordHook func(ctx context.Context, r *kgo.Record, reason error) error

// Option configures NewConsumer. No option involves the exchange type, so
// none takes a type argument.
type Option func(*config)

type config struct {
	client         []kgo.Opt
	maxPending     int
	maxHeld        int
	maxHeldBytes   int64
	groups         int
	maxPoll        int
	mapLen         int
	revokeTimeout  time.Duration
	commitTimeout  time.Duration
	connectTimeout time.Duration
	retryCommit    time.Duration
	logger         *slog.Logger
	onBad          BadRecordHook
	onCommit       func(p int32, offset int64)
	partition      []partition.Option
	failing        *failing // WithFailurePolicy's, nil without
}

// DefaultMaxPending is a Consumer's default budget, in records: 65,536,
// 8,192 per partition for 8 partitions. A
// partition's fetch buffer dropped by a pause is fetched and decoded again,
// so a budget much smaller than what the handlers drain in a fetch's round
// trip pauses often and costs throughput (docs/tuning.md says how to size it).
const DefaultMaxPending = 64 * 1024

func defaults() config {
	return config{
		maxPending:     DefaultMaxPending,
		maxHeld:        partition.DefaultMaxHeldRecords,
		maxHeldBytes:   partition.DefaultMaxHeldBytes,
		maxPoll:        1000,
		mapLen:         partition.DefaultFinishedMapLen,
		revokeTimeout:  10 * time.Second,
		commitTimeout:  10 * time.Second,
		connectTimeout: 10 * time.Second,
		retryCommit:    100 * time.Millisecond,
		logger:         slog.Default(),
	}
}

// WithClientOptions passes options to the franz-go client: TLS, SASL,
// timeouts, the balancers. The group, the topic, commits and the rebalance
// callbacks are the Consumer's to set; a FetchMaxWait here replaces the
// default of 250 ms.
func WithClientOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.client = append(c.client, opts...) }
}

// WithMaxPending sets the budget of the whole consumer: records delivered
// and not yet ended, over all its partitions (default DefaultMaxPending).
// A partition whose pending records reach its share (the budget over the
// partitions owned) is paused until they fall below half of it, so one slow partition never stalls the others. The
// records pending stay under n + the max poll records (a batch is delivered
// whole). It counts the unfinished records only: what a stuck record makes
// a partition hold, finished records above it included, is WithMaxHeld's.
func WithMaxPending(n int) Option { return func(c *config) { c.maxPending = n } }

// WithMaxHeld sets each partition's bound above its committed offset (the
// finished prefix + 1): at most records offsets held, finished or not, and
// bytes of their keys and values (0: records only), by default
// partition.DefaultMaxHeldRecords and partition.DefaultMaxHeldBytes. A
// partition that reached either is paused (PauseFetchPartitions: that
// partition only) until both fell to half, so a record whose handler is
// stuck keeps at most the bound plus one polled batch (WithMaxPollRecords)
// of the records after it: the consumer's memory bound is the partitions
// owned times that. Invalid values return ErrInvalidArgument.
func WithMaxHeld(records int, bytes int64) Option {
	return func(c *config) { c.maxHeld, c.maxHeldBytes = records, bytes }
}

// WithGroups sets the number of groups of each partition (default
// aggregate.DefaultParallelism): how many aggregates of one partition run at
// once, at most the scheduler's goroutines.
func WithGroups(n int) Option { return func(c *config) { c.groups = n } }

// WithFinishedMapLen sets the longest commit metadata the Consumer writes,
// in bytes (default partition.DefaultFinishedMapLen, 4000, under Kafka's
// default offset.metadata.max.bytes of 4096; set it below the broker's):
// the map of the records finished above each committed offset, which the
// partition's next owner skips (see the package doc). A map that does not
// fit keeps the records that do, from the commit up; the rest is replayed
// after a crash. 0 writes no map: a crash replays everything above the
// commit. Negative is refused (ErrInvalidArgument).
func WithFinishedMapLen(n int) Option { return func(c *config) { c.mapLen = n } }

// WithMaxPollRecords sets how many records one poll returns at most
// (default 1000): the most a partition takes above its pause limits (see
// WithMaxPending, WithMaxHeld).
func WithMaxPollRecords(n int) Option { return func(c *config) { c.maxPoll = n } }

// WithRevokeTimeout sets how long a revoked partition, and every partition
// on a graceful stop, drains before the rest is forced (default 10 s); its
// final commit is tried again until the same deadline. The kept partitions
// are fetched and handled meanwhile; the moved ones wait for it. With the
// commit timeout (the last try's) it must fit in the group's rebalance
// timeout (kgo.RebalanceTimeout, 60 s by default), or Prepare returns
// ErrInvalidArgument.
func WithRevokeTimeout(d time.Duration) Option {
	return func(c *config) { c.revokeTimeout = d }
}

// WithCommitTimeout sets how long one commit waits for the broker's answer
// (default 10 s).
func WithCommitTimeout(d time.Duration) Option {
	return func(c *config) { c.commitTimeout = d }
}

// WithConnectTimeout sets how long Prepare waits for the brokers to answer
// (default 10 s); past it, Prepare returns ErrUnreachable.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) { c.connectTimeout = d }
}

// WithLogger sets the logger (default slog.Default()). A panic of its
// handler costs the line it was writing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithBadRecordHook sets what happens to a record without a key or that
// does not decode. The default logs it at warning level with the reason and
// discards it.
func WithBadRecordHook(h BadRecordHook) Option { return func(c *config) { c.onBad = h } }

// WithCommitHook sets a function called after the broker acknowledged a
// commit, once per partition, with the offset committed (the finished
// prefix + 1). The committing goroutine waits for it (it runs on a
// goroutine of its own, so that a runtime.Goexit in it is logged as its
// panic is and costs no later commit); keep it short.
func WithCommitHook(h func(p int32, offset int64)) Option {
	return func(c *config) { c.onCommit = h }
}

// WithPartitionOptions passes options to the partition.Dispatcher: the
// force grace and, through partition.WithDispatchOptions, observers and the
// failure log level. Groups, budget and logger are the Consumer's to set.
func WithPartitionOptions(opts ...partition.Option) Option {
	return func(c *config) { c.partition = append(c.partition, opts...) }
}
