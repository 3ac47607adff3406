package kafka

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
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
// component.Component: a Runtime prepares, starts and stops it with the rest.
//
// Commits: one goroutine commits the prefixes that moved, synchronously; an
// offset counts as committed only once the broker acknowledged it, and a
// commit starts only after the answer to the previous one. A revoked
// partition drains (WithRevokeTimeout), the rest is forced, its settled
// prefix is committed synchronously (tried again with backoff until the
// same deadline), and only then does the rebalance go on; the kept
// partitions are polled and handled meanwhile.
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
	cfg   config
	disp  *partition.Dispatcher[T]
	life  component.Lifecycle

	mu      sync.Mutex
	closing bool // no partition is assigned any more
	cl      *kgo.Client
	owned   map[int32]*owned[T]

	// Made by Prepare (c.mu) before it moves to StatePrepared; read without
	// c.mu by what runs after that move.
	base     context.Context // Prepare's values; cancelled by ForceStop and at the end
	force    context.CancelCauseFunc
	pollCtx  context.Context // cancelled by the first stop
	stopPoll context.CancelFunc

	high      map[int32]int64  // highest offset delivered per partition released (c.mu)
	lapses    map[int32]*lease // leases seen passed, for the poll loop to renew (c.mu)
	leases    map[*lease]bool  // of the partitions owned or being released (c.mu)
	wakePoll  func()           // ends the poll in progress (c.mu)
	assigning int              // assignments waiting for the poll in progress (c.mu)
	// pollMu is held across a poll and the lookup of its owners (pollOnce);
	// rebal serialises taking partitions from owned and adding them there
	// (the rebalance callbacks' and renew's), never held across a drain.
	pollMu sync.Mutex
	rebal  sync.Mutex
	// The fence's clock (see sessionHook): the send time, monotonic, of the
	// last SyncGroup answered, and how long a proof makes a lease valid
	// (the session timeout less a fifth, set by Prepare).
	synced    atomic.Int64
	leaseFor  int64
	pauseMu   sync.Mutex    // orders pause decisions; held across kgo's Pause and Resume only
	kick      chan struct{} // a prefix may have moved, or room was freed
	commitSem chan struct{} // one commit at a time, in the order taken
	mgrStop   chan struct{}
	mgr       sync.WaitGroup // the committing goroutine and the forwarders
	stats     counters
	kept      keptRecords // with a dead-letter policy: the records not committed past
}

// owned is one partition the consumer owns.
type owned[T any] struct {
	in        *partition.Intake[T]
	lease     *lease
	from      int64  // the offset the intake started at
	committed int64  // the offset the broker acknowledged last, -1 if none (c.mu)
	meta      string // the metadata acknowledged with it: a partition.FinishedMap or "" (c.mu)
	// skip is the FinishedMap read at the assignment: its positions were
	// finished by a previous owner, and are tracked as finished, not
	// delivered (the poll loop's).
	skip    partition.FinishedMap
	paused  bool         // c.pauseMu
	high    atomic.Int64 // the highest offset delivered, in this process
	gone    atomic.Bool  // released: the poll loop delivers no more to it
	end     int64        // the high watermark the last fetch reported, when fetched (c.mu)
	fetched bool
	stop    chan struct{}
	stopped chan struct{}
}

type counters struct {
	delivered, discarded, commits, commitFailures, uncommitted, assigned, revoked, lost, pauses atomic.Int64
	succeeded, failed, dropped, staleCommits, lapsed, skipped                                   atomic.Int64
}

// Stats are a Consumer's counters since it was made.
type Stats struct {
	// Delivered counts records handed to a partition's intake.
	Delivered int64
	// Discarded counts bad records (no key, not decodable) the bad-record
	// hook discarded.
	Discarded int64
	// Skipped counts records not delivered because the commit's metadata
	// (a partition.FinishedMap) recorded them finished by a previous
	// owner: a crash replays only what had not finished.
	Skipped int64
	// Failures counts what the failure policy did (WithFailurePolicy), in
	// every partition, live.
	Failures partition.FailureStats
	// Commits counts partition offsets the broker acknowledged;
	// CommitFailures, commit requests that failed (each try).
	Commits, CommitFailures int64
	// Uncommitted counts revoked partitions left without their final
	// commit because the group had moved on (it answered that this
	// member's generation is over, or a rebalance is in progress): a
	// rebalance took them, and their next owner reads what ran above the
	// last commit again, in order.
	Uncommitted int64
	// Assigned, Revoked and Lost count partitions.
	Assigned, Revoked, Lost int64
	// Pauses counts the times a partition was paused for want of room.
	Pauses int64
	// Succeeded and Failed count the records handled (the handler returned
	// nil, or an error or panicked), Dropped those a force discarded or
	// cancelled, in the partitions released so far: every partition, once
	// Done is closed.
	Succeeded, Failed, Dropped int64
	// StaleCommits counts partition offsets the group refused because this
	// member's generation is over or being replaced (ILLEGAL_GENERATION,
	// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, a fenced instance or
	// epoch): a zombie's commits, each logged at warning level and never
	// taken as committed.
	StaleCommits int64
	// Lapsed counts the leases seen passed (see LeaseOf): the member may
	// have been fenced by the group.
	Lapsed int64
}

// NewConsumer returns a Consumer named name that reads sub and hands the
// records, decoded by codec, to handler on sched (borrowed: its owner
// disposes it after the Consumer is done), grouped by codec.ID inside each
// partition. It starts nothing and connects nowhere: Prepare checks the
// brokers and the topic, Start joins the group. Invalid arguments return an
// error wrapping ErrInvalidArgument.
func NewConsumer[T any](name string, sub Subscription, named aggregate.NamedAggregate, sched schedulers.Scheduler,
	codec Codec[T], handler dispatch.Handler[partition.Delivery[T]], opts ...Option) (*Consumer[T], error) {
	c := defaults()
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
	case c.mapLen < 0:
		return nil, fmt.Errorf("%w: consumer %q: finished map length %d (0 writes none)", ErrInvalidArgument, name, c.mapLen)
	case c.maxPending < 1 || c.maxPoll < 1 || c.revokeTimeout <= 0 || c.commitTimeout <= 0 ||
		c.connectTimeout <= 0 || c.logger == nil || c.groups < 0:
		return nil, fmt.Errorf("%w: consumer %q: max pending %d, max poll records %d, groups %d, revoke timeout %v, commit timeout %v, connect timeout %v",
			ErrInvalidArgument, name, c.maxPending, c.maxPoll, c.groups, c.revokeTimeout, c.commitTimeout, c.connectTimeout)
	case c.maxHeld < 1 || c.maxHeldBytes < 0:
		return nil, fmt.Errorf("%w: consumer %q: max held %d records, %d bytes", ErrInvalidArgument, name, c.maxHeld, c.maxHeldBytes)
	}
	c.logger = component.GuardLogger(c.logger) // a panicking log handler costs its line, not the goroutine logging
	if c.onBad == nil {
		c.onBad = logBadRecord(c.logger, name)
	}
	popts := append([]partition.Option{}, c.partition...)
	// A partition's own budget holds the consumer's plus one polled batch, so
	// that delivering a batch never waits: the pause rule keeps the sum.
	popts = append(popts, partition.WithMaxPending(c.maxPending+c.maxPoll), partition.WithLogger(c.logger),
		partition.WithMaxHeld(c.maxHeld, c.maxHeldBytes))
	if c.groups > 0 {
		popts = append(popts, partition.WithGroups(c.groups))
	}
	disp, err := partition.NewDispatcher(name, named, sched, codec.ID, gate(handler), popts...)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %q: %w", ErrInvalidArgument, name, err)
	}
	k := &Consumer[T]{name: name, sub: sub, codec: codec, cfg: c, disp: disp,
		owned: map[int32]*owned[T]{}, high: map[int32]int64{}, lapses: map[int32]*lease{}, leases: map[*lease]bool{},
		kick: make(chan struct{}, 1), commitSem: make(chan struct{}, 1), mgrStop: make(chan struct{})}
	k.life.Init("consumer", name, ErrIllegalState, k.end)
	if err := k.cfg.failing.bind(k, k.name, k.sub.Topic); err != nil {
		return nil, err
	}
	return k, nil
}

// Name returns the consumer's name.
func (c *Consumer[T]) Name() string { return c.name }

// State returns the lifecycle state. ForceStop moves it to StateStopped at
// once; Done tells when everything ended.
func (c *Consumer[T]) State() component.State { return c.life.State() }

// Done closes once the consumer stopped, left the group and every goroutine
// it started has exited.
func (c *Consumer[T]) Done() <-chan struct{} { return c.life.Done() }

// Err returns the first error: a bad record the hook refused (ErrBadRecord),
// a partition that could not be assigned (ErrAssign), a setting the broker
// refused (ErrRefused), the final commit of revoked partitions that still
// failed at the revoke's deadline (ErrCommit). Meaningful once Done is
// closed.
func (c *Consumer[T]) Err() error { return c.life.Err() }

// Stats returns the counters.
func (c *Consumer[T]) Stats() Stats {
	s := &c.stats
	return Stats{Failures: c.disp.Failures(), Delivered: s.delivered.Load(), Discarded: s.discarded.Load(), Skipped: s.skipped.Load(), Commits: s.commits.Load(),
		CommitFailures: s.commitFailures.Load(), Uncommitted: s.uncommitted.Load(), Assigned: s.assigned.Load(), Revoked: s.revoked.Load(), Lost: s.lost.Load(),
		Pauses: s.pauses.Load(), Succeeded: s.succeeded.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load(),
		StaleCommits: s.staleCommits.Load(), Lapsed: s.lapsed.Load()}
}

// Owned returns the partitions owned now, in no order.
func (c *Consumer[T]) Owned() []int32 { return c.disp.Owned() }

// Prepare checks that the brokers answer within the connect timeout
// (ErrUnreachable otherwise) and that the topic exists (ErrNoTopic), and
// refuses (ErrInvalidArgument) a heartbeat interval of 2/5 of the session
// timeout or more, which would let the leases lapse between heartbeats, and
// a revoke timeout plus commit timeout above the rebalance timeout. The
// handlers' contexts carry ctx's values. It does not join the group. From a
// state other than StateNew, or while another Prepare runs, it returns an
// error wrapping ErrIllegalState.
func (c *Consumer[T]) Prepare(ctx context.Context) error {
	if err := c.life.Step("prepare", component.StateNew); err != nil {
		return err
	}
	defer c.life.Leave()
	if err := c.check(ctx); err != nil {
		return err
	}
	base, force := context.WithCancelCause(context.WithoutCancel(ctx))
	pollCtx, stopPoll := context.WithCancel(base)
	c.mu.Lock()
	c.base, c.force, c.pollCtx, c.stopPoll = base, force, pollCtx, stopPoll
	c.mu.Unlock()
	if !c.life.Advance(component.StateNew, component.StatePrepared) {
		return c.life.Refuse("prepare") // a stop came first; the end cancels the contexts
	}
	return nil
}

// Start joins the group and starts the poll loop and the committing
// goroutine. From a state other than StatePrepared it returns an error
// wrapping ErrIllegalState.
func (c *Consumer[T]) Start() error {
	if err := c.life.Step("start", component.StatePrepared); err != nil {
		return err
	}
	defer c.life.Leave()
	// The client joins the group at once: c.mu keeps the rebalance
	// callbacks, which take it, waiting for c.cl.
	c.mu.Lock()
	cl, err := kgo.NewClient(c.clientOptions()...)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: consumer %q: client options: %w", ErrInvalidArgument, c.name, err)
	}
	c.cl = cl
	c.mu.Unlock()
	// The client joins the group from here on, so the goroutines start
	// even when a stop came first: it cancelled the poll loop's context,
	// and the loop releases what was assigned, closes the client and ends.
	c.life.Hold() // cannot fail: the Step holds
	running := c.life.Advance(component.StatePrepared, component.StateRunning)
	c.mgr.Add(1)
	c.goJoined("committing", c.manage)
	component.Go(func() error { return c.poll(c.pollCtx) }, c.run)
	if !running {
		return c.life.Refuse("start")
	}
	return nil
}

// Quiesce begins a graceful stop without waiting: the poll loop stops
// delivering, then every partition drains and commits, and the consumer
// leaves the group. Before Start it stops the consumer at once.
// Idempotent.
func (c *Consumer[T]) Quiesce() {
	from, first := c.life.Quiesce()
	if !first {
		return
	}
	if from >= component.StatePrepared {
		c.stopPoll() // a Start in progress may have begun the loop
	}
	if from < component.StateRunning {
		c.life.Stop() // nothing was delivered
	}
}

// StopGracefully quiesces and waits until Done, then returns Err; or, when
// ctx ends first, an error wrapping ctx's naming the partitions still
// draining (the stop goes on: each partition drains up to the revoke
// timeout, then is forced).
func (c *Consumer[T]) StopGracefully(ctx context.Context) error {
	c.Quiesce()
	return c.life.Await(ctx, func(err error) error {
		return fmt.Errorf("kafka: consumer %q not stopped: partitions %v draining: %w", c.name, c.disp.Held(), err)
	})
}

// ForceStop drops what has not started, cancels the handlers that run
// (their context's cause is dispatch.ErrForceStopped), commits nothing more
// and returns at once; Done closes once the client has closed. It takes
// over a graceful stop in progress. Idempotent, safe at any time.
func (c *Consumer[T]) ForceStop() {
	if _, first := c.life.Force(); first {
		c.cancelBase(dispatch.ErrForceStopped)
	}
}

// end runs once, at the physical end: Prepare's contexts are released (a
// Prepare that a stop overtook made them too).
func (c *Consumer[T]) end() { c.cancelBase(dispatch.ErrStopped) }

// cancelBase cancels the handlers' and the poll loop's contexts, once
// Prepare made them, with cause.
func (c *Consumer[T]) cancelBase(cause error) {
	c.mu.Lock()
	force := c.force
	c.mu.Unlock()
	if force != nil {
		force(cause)
	}
}

// fail records err and begins a graceful stop.
func (c *Consumer[T]) fail(err error) {
	c.life.Record(err)
	c.Quiesce()
}

// run is the poll loop, then the shutdown: every partition released (drained
// and committed, or forced when the stop was forced), the group left, the
// other goroutines joined. User code on the loop's goroutine (the decoder,
// the id function, the hooks) that ends it with runtime.Goexit fails the
// consumer as a poll error would, and the shutdown runs on the way out.
// It is the end of the poll loop's guard (component.Go): err is the loop's
// error, or its panic or Goexit as a *PanicError.
func (c *Consumer[T]) run(err error) {
	defer c.life.Release()
	if pe, ok := err.(*component.PanicError); ok {
		err = fmt.Errorf("kafka: consumer %q: poll loop: %w", c.name, pe)
	}
	if err != nil {
		c.fail(err)
	}
	c.shutdown()
}

// goJoined runs f, one of the goroutines the shutdown joins (c.mgr, added
// by the caller), under the guard, and marks it done when f ends, however
// it ends: a panic or runtime.Goexit of the code f runs fails the consumer,
// its error naming what.
func (c *Consumer[T]) goJoined(what string, f func()) {
	component.Go(func() error { f(); return nil }, func(err error) {
		defer c.mgr.Done()
		if err != nil {
			c.fail(fmt.Errorf("kafka: consumer %q: %s: %w", c.name, what, err))
		}
	})
}

// shutdown is run's end: see run.
func (c *Consumer[T]) shutdown() {
	c.mu.Lock()
	c.closing = true
	ps := make([]int32, 0, len(c.owned))
	for p := range c.owned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	c.release(ps, !c.life.Forced())
	c.cl.Close()
	close(c.mgrStop)
	c.mgr.Wait()
	if _, err := c.disp.Close(context.Background()); err != nil {
		c.cfg.logger.Error("kafka: closing the partition dispatcher", "consumer", c.name, "error", err)
	}
	c.life.Stop()
}

// nudge wakes the committing goroutine.
func (c *Consumer[T]) nudge() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
