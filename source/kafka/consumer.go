package kafka

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// Consumer is one member of a Kafka consumer group whose records go to one
// named aggregate's handler: each partition the group assigns it becomes an
// intake of a partition.Dispatcher (its own lanes, on the one borrowed
// scheduler), records are delivered in offset order from one poll loop, and
// only each partition's finished prefix is committed (as prefix + 1, the
// next offset to read), never a record still running. It is a
// dispatch.Component: a Runtime prepares, starts and stops it with the rest.
//
// Commits: one goroutine commits the prefixes that moved, synchronously; an
// offset counts as committed only once the broker acknowledged it, and a
// commit starts only after the answer to the previous one. A revoked
// partition drains (WithRevokeTimeout), the rest is forced, its settled
// prefix is committed synchronously, and only then does the rebalance go on.
// A lost partition is forced and not committed. A stop revokes every
// partition the same way, then leaves the group.
//
// Order across a crash or a rebalance: the next owner reads from the last
// commit, so what ran above it runs again, after what came before it, in
// order: duplicates are in-order replays, idempotency is the handler's.
//
// Costs: the franz-go client, the poll loop and the committing goroutine,
// and per owned partition its intake (see partition.Dispatcher) and one
// parked goroutine that forwards its progress. Every method is safe for
// concurrent use.
type Consumer[T any] struct {
	name  string
	sub   Subscription
	codec Codec[T]
	cfg   config[T]
	disp  *partition.Dispatcher[T]

	mu        sync.Mutex
	state     dispatch.State
	preparing bool
	forced    bool
	closing   bool // no partition is assigned any more
	err       error
	cl        *kgo.Client
	owned     map[int32]*owned[T]

	base     context.Context // Prepare's values; cancelled by ForceStop
	force    context.CancelCauseFunc
	pollCtx  context.Context // cancelled by the first stop
	stopPoll context.CancelFunc

	high      map[int32]int64 // highest offset delivered per partition released (c.mu)
	pauseMu   sync.Mutex      // orders pause decisions; held across kgo's Pause and Resume only
	kick      chan struct{}   // a prefix may have moved, or room was freed
	commitSem chan struct{}   // one commit at a time, in the order taken
	mgrStop   chan struct{}
	mgr       sync.WaitGroup // the committing goroutine and the forwarders
	done      chan struct{}
	stats     counters
}

// owned is one partition the consumer owns.
type owned[T any] struct {
	in        *partition.Intake[T]
	committed int64 // the offset the broker acknowledged last, -1 if none (c.mu)
	paused    bool  // c.pauseMu
	high      int64 // the highest offset delivered, in this process: the poll loop's
	stop      chan struct{}
	stopped   chan struct{}
}

type counters struct {
	delivered, discarded, commits, commitFailures, assigned, revoked, lost, pauses atomic.Int64
	succeeded, failed, dropped                                                     atomic.Int64
}

// Stats are a Consumer's counters since it was made.
type Stats struct {
	// Delivered counts records handed to a partition's intake.
	Delivered int64
	// Discarded counts bad records (no key, not decodable) the bad-record
	// hook discarded.
	Discarded int64
	// Commits counts partition offsets the broker acknowledged;
	// CommitFailures, commit requests that failed.
	Commits, CommitFailures int64
	// Assigned, Revoked and Lost count partitions.
	Assigned, Revoked, Lost int64
	// Pauses counts the times a partition was paused for want of room.
	Pauses int64
	// Succeeded and Failed count the records handled (the handler returned
	// nil, or an error or panicked), Dropped those a force discarded or
	// cancelled, in the partitions released so far: every partition, once
	// Done is closed.
	Succeeded, Failed, Dropped int64
}

// NewConsumer returns a Consumer named name that reads sub and hands the
// records, decoded by codec, to handler on sched (borrowed: its owner
// disposes it after the Consumer is done), grouped by codec.ID inside each
// partition. It starts nothing and connects nowhere: Prepare checks the
// brokers and the topic, Start joins the group. Invalid arguments return an
// error wrapping ErrInvalidArgument.
func NewConsumer[T any](name string, sub Subscription, named aggregate.NamedAggregate, sched schedulers.Scheduler,
	codec Codec[T], handler dispatch.Handler[partition.Delivery[T]], opts ...Option[T]) (*Consumer[T], error) {
	c := defaults[T]()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case name == "" || sub.Group == "" || sub.Topic == "" || len(sub.Brokers) == 0:
		return nil, fmt.Errorf("%w: a consumer needs a name, seed brokers, a group and a topic", ErrInvalidArgument)
	case named == nil || sched == nil || codec.Decode == nil || codec.ID == nil || handler == nil:
		return nil, fmt.Errorf("%w: consumer %q needs a named aggregate, a scheduler, a decoder, an id function and a handler", ErrInvalidArgument, name)
	case c.maxPending < 1 || c.maxPoll < 1 || c.revokeTimeout <= 0 || c.commitTimeout <= 0 ||
		c.connectTimeout <= 0 || c.logger == nil || c.groups < 0:
		return nil, fmt.Errorf("%w: consumer %q: max pending %d, max poll records %d, groups %d, revoke timeout %v, commit timeout %v, connect timeout %v",
			ErrInvalidArgument, name, c.maxPending, c.maxPoll, c.groups, c.revokeTimeout, c.commitTimeout, c.connectTimeout)
	}
	if c.onBad == nil {
		c.onBad = logBadRecord(c.logger, name)
	}
	popts := append([]partition.Option[T]{}, c.partition...)
	// A partition's own budget holds the consumer's plus one polled batch, so
	// that delivering a batch never waits: the pause rule keeps the sum.
	popts = append(popts, partition.WithMaxPending[T](c.maxPending+c.maxPoll), partition.WithLogger[T](c.logger))
	if c.groups > 0 {
		popts = append(popts, partition.WithGroups[T](c.groups))
	}
	disp, err := partition.NewDispatcher(name, named, sched, codec.ID, handler, popts...)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %q: %w", ErrInvalidArgument, name, err)
	}
	return &Consumer[T]{name: name, sub: sub, codec: codec, cfg: c, disp: disp,
		owned: map[int32]*owned[T]{}, high: map[int32]int64{},
		kick: make(chan struct{}, 1), commitSem: make(chan struct{}, 1), mgrStop: make(chan struct{}),
		done: make(chan struct{})}, nil
}

// Name returns the consumer's name.
func (c *Consumer[T]) Name() string { return c.name }

// State returns the lifecycle state.
func (c *Consumer[T]) State() dispatch.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Done closes once the consumer stopped, left the group and every goroutine
// it started has exited.
func (c *Consumer[T]) Done() <-chan struct{} { return c.done }

// Err returns the first error: a bad record the hook refused, a partition
// that could not be assigned, a fetch that failed for good. Meaningful once
// Done is closed.
func (c *Consumer[T]) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stats returns the counters.
func (c *Consumer[T]) Stats() Stats {
	s := &c.stats
	return Stats{Delivered: s.delivered.Load(), Discarded: s.discarded.Load(), Commits: s.commits.Load(),
		CommitFailures: s.commitFailures.Load(), Assigned: s.assigned.Load(), Revoked: s.revoked.Load(), Lost: s.lost.Load(),
		Pauses: s.pauses.Load(), Succeeded: s.succeeded.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load()}
}

// Owned returns the partitions owned now, in no order.
func (c *Consumer[T]) Owned() []int32 { return c.disp.Owned() }

// Prepare checks that the brokers answer within the connect timeout
// (ErrUnreachable otherwise) and that the topic exists (ErrNoTopic). The
// handlers' contexts carry ctx's values. It does not join the group.
func (c *Consumer[T]) Prepare(ctx context.Context) error {
	c.mu.Lock()
	if c.state != dispatch.StateNew || c.preparing || c.forced {
		defer c.mu.Unlock()
		return c.refuseLocked("prepare")
	}
	c.preparing = true
	c.mu.Unlock()

	err := c.check(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.preparing = false
	switch {
	case err != nil:
		return err
	case c.state != dispatch.StateNew || c.forced:
		return c.refuseLocked("prepare")
	}
	c.base, c.force = context.WithCancelCause(context.WithoutCancel(ctx))
	c.pollCtx, c.stopPoll = context.WithCancel(c.base)
	c.state = dispatch.StatePrepared
	return nil
}

// Start joins the group and starts the poll loop and the committing
// goroutine.
func (c *Consumer[T]) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != dispatch.StatePrepared || c.forced {
		return c.refuseLocked("start")
	}
	cl, err := kgo.NewClient(c.clientOptions()...)
	if err != nil {
		return fmt.Errorf("%w: consumer %q: client options: %w", ErrInvalidArgument, c.name, err)
	}
	c.cl = cl
	c.state = dispatch.StateRunning
	c.mgr.Add(1)
	go c.manage()
	go c.run()
	return nil
}

// Quiesce begins a graceful stop without waiting: the poll loop stops
// delivering, then every partition drains and commits, and the consumer
// leaves the group.
func (c *Consumer[T]) Quiesce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quiesceLocked()
}

func (c *Consumer[T]) quiesceLocked() {
	switch c.state {
	case dispatch.StateNew, dispatch.StatePrepared:
		c.endLocked()
	case dispatch.StateRunning:
		c.state = dispatch.StateStopping
		c.stopPoll()
	}
}

// StopGracefully quiesces and waits until Done, then returns Err; or, when
// ctx ends first, an error wrapping ctx's (the stop goes on: each partition
// drains up to the revoke timeout, then is forced).
func (c *Consumer[T]) StopGracefully(ctx context.Context) error {
	c.Quiesce()
	select {
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return fmt.Errorf("kafka: consumer %q: stop: %w", c.name, ctx.Err())
	}
}

// ForceStop drops what has not started, cancels the handlers that run
// (their context's cause is dispatch.ErrForceStopped), commits nothing more
// and returns at once; Done closes once the client has closed.
func (c *Consumer[T]) ForceStop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forced {
		return
	}
	c.forced = true
	if c.force != nil {
		c.force(dispatch.ErrForceStopped)
	}
	c.quiesceLocked()
}

// endLocked reaches the end when no goroutine was started.
func (c *Consumer[T]) endLocked() {
	if c.state != dispatch.StateStopped {
		c.state = dispatch.StateStopped
		if c.force != nil {
			c.force(dispatch.ErrStopped)
		}
		close(c.done)
	}
}

func (c *Consumer[T]) refuseLocked(op string) error {
	return fmt.Errorf("%w: consumer %q cannot %s from state %v", ErrIllegalState, c.name, op, c.state)
}

// fail records err and begins a graceful stop.
func (c *Consumer[T]) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	if c.state == dispatch.StateRunning {
		c.state = dispatch.StateStopping
		c.stopPoll()
	}
}

// run is the poll loop, then the shutdown: every partition released (drained
// and committed, or forced when the stop was forced), the group left, the
// other goroutines joined.
func (c *Consumer[T]) run() {
	if err := c.poll(c.pollCtx); err != nil {
		c.fail(err)
	}
	c.mu.Lock()
	c.closing = true
	forced := c.forced
	ps := make([]int32, 0, len(c.owned))
	for p := range c.owned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	c.release(ps, !forced)
	c.cl.Close()
	close(c.mgrStop)
	c.mgr.Wait()
	if _, err := c.disp.Close(context.Background()); err != nil {
		c.cfg.logger.Error("kafka: closing the partition dispatcher", "consumer", c.name, "error", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked()
}

// nudge wakes the committing goroutine.
func (c *Consumer[T]) nudge() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
