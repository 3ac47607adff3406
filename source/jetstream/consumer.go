package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// Consumer reads the partitions a process owns from JetStream and hands
// their exchanges to one named aggregate's handler through a
// partition.Dispatcher, acknowledging only each partition's finished prefix.
// It is a component.Component: put it in a component.Runtime, or call Prepare,
// Start and a stop yourself.
//
// Each owned partition p is read by a durable pull consumer "<durable>-<p>"
// filtered on the topology's subject of p, with AckAll (acknowledging the
// message at the prefix acknowledges all below it), a long AckWait and
// MaxAckPending above the pending budget, so that the server never
// redelivers by itself. On Start each durable consumer is reset to its ack
// floor + 1: after a crash the partition is delivered again, in order, from
// the first position not acknowledged, so an aggregate sees an in-order
// replay of its last exchanges and never a reordering. While it runs, a
// partition whose continuity breaks (a delivery it missed, a failed pull, a
// server restart: see Resets in the package doc) is reset the same way.
//
// A graceful stop revokes every partition (partition.Dispatcher.Revoke: the
// fetching stops, what was delivered drains, and what is left when ForceStop
// comes is forced), acknowledges each settled prefix and waits for the
// server's confirmation before Done. ForceStop loses the partitions
// (partition.Dispatcher.Lose) and acknowledges nothing more: the next owner
// receives again what was not acknowledged.
//
// Goroutines: per owned partition two (fetching and acknowledging) plus the
// partition.Dispatcher's two, two for the consumer (supervising, and
// renewing and claiming the leases), and one per partition being reset; all
// are joined before Done closes. Every method is safe for concurrent use.
type Consumer[T any] struct {
	name    string
	js      natsjs.JetStream
	topo    Topology
	owned   []int32
	decode  func(key string, msg natsjs.Msg) (T, error)
	cfg     config
	disp    *partition.Dispatcher[T]
	fetched atomic.Int64
	acks    atomic.Int64
	reject  atomic.Int64
	dups    atomic.Int64
	resets  atomic.Int64
	skips   atomic.Int64

	// life is the state, the first error, the force and Done: its holds are
	// supervise, each Revoke, handoff and loss, and Prepare and Start while
	// they run. Its finalizer (end) runs once the last is given back.
	life component.Lifecycle

	mu     sync.Mutex
	parts  map[int32]*part[T]
	opened []*part[T] // every partition opened, owned still or not: for Stats
	// resetStats sums the counters of the parts a reset replaced, taken
	// out of opened.
	resetStats dispatch.Stats
	// received is the highest position this process received of each
	// partition, over the parts released: a later part counts the
	// positions at or below it as delivered before (Attempt 2 at least).
	received map[int32]int64
	stream   natsjs.Stream // found by Prepare

	// The bucket, the leases held (owned, or being released), the
	// partitions of a static assignment not held (under mu), and the
	// assigning goroutine's signals.
	lz             *leases
	fm             natsjs.KeyValue // the finished maps (finished.go)
	leased         map[int32]*lease
	wanted         map[int32]claimWait
	openFailed     map[int32]time.Time // since when a claimed partition's open has failed for want of an answer
	kick           chan struct{}       // a static partition was lost: claim it again now
	balanceStopped chan struct{}       // closed once the assigning goroutine claims and releases no more
	stopRenew      chan struct{}       // closed by supervise once every partition is released
	assignDone     chan struct{}       // closed when the assigning goroutine ended
	assigning      bool                // under mu: the assigning goroutine was started
	renewed        int64               // the assigning goroutine's: the monotonic time its last renewals began

	quit     chan struct{} // closed when a stop begins
	quitOnce sync.Once

	// runCtx carries Prepare's values; it is cancelled by ForceStop and at
	// the end. drainCtx bounds the drain of a graceful stop: ForceStop
	// cancels it.
	runCtx      context.Context
	cancelRun   context.CancelFunc
	drainCtx    context.Context
	cancelDrain context.CancelFunc
}

// NewConsumer returns a Consumer named name that reads the partitions
// sub.Owned of sub.Topology through sub.JetStream and hands the messages,
// decoded by codec, to handler, for the exchanges of named, on sched
// (borrowed: its owner disposes it after the Consumer is done), grouped by
// codec.ID inside each partition. It starts nothing and sends nothing:
// Prepare checks the stream and makes the durable consumers, Start pulls.
// Invalid arguments return an error wrapping ErrInvalidArgument that names
// the field.
func NewConsumer[T any](name string, sub Subscription, named aggregate.NamedAggregate, sched schedulers.Scheduler,
	codec Codec[T], handler dispatch.Handler[partition.Delivery[T]], opts ...Option) (*Consumer[T], error) {
	if err := checkArguments(name, sub, named, sched, codec, handler); err != nil {
		return nil, err
	}
	cfg, err := newConfig(name, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (consumer %q)", err, name) // the sentinel's text first, as in every refusal
	}
	topo, owned := sub.Topology, sub.Owned
	switch {
	case cfg.dynamic() && len(owned) != 0:
		return nil, fmt.Errorf("%w: consumer %q: Subscription.Owned lists partitions with a dynamic assignment", ErrInvalidArgument, name)
	case !cfg.dynamic() && len(owned) == 0:
		return nil, fmt.Errorf("%w: consumer %q: Subscription.Owned is empty (a static assignment owns at least one partition)", ErrInvalidArgument, name)
	}
	for i, p := range owned {
		if p < 0 || int(p) >= topo.Partitions || slices.Contains(owned[:i], p) {
			return nil, fmt.Errorf("%w: consumer %q: Subscription.Owned: partition %d out of [0, %d) or listed twice",
				ErrInvalidArgument, name, p, topo.Partitions)
		}
	}
	handler = gate(handler)
	popts := append(slices.Clone(cfg.partition), partition.WithMaxPending(cfg.maxPending), partition.WithLogger(cfg.logger),
		partition.WithMaxHeld(cfg.maxHeld, cfg.maxHeldBytes))
	disp, err := partition.NewDispatcher(name, named, sched, codec.ID, handler, popts...)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %q: %w", ErrInvalidArgument, name, err)
	}
	c := &Consumer[T]{name: name, js: sub.JetStream, topo: topo, owned: slices.Clone(owned), decode: codec.Decode, cfg: cfg, disp: disp,
		parts: map[int32]*part[T]{}, received: map[int32]int64{},
		quit: make(chan struct{}), leased: map[int32]*lease{}, wanted: map[int32]claimWait{}, openFailed: map[int32]time.Time{}, kick: make(chan struct{}, 1),
		balanceStopped: make(chan struct{}), stopRenew: make(chan struct{}), assignDone: make(chan struct{})}
	c.drainCtx, c.cancelDrain = context.WithCancel(context.Background())
	c.life.Init("consumer", name, ErrIllegalState, c.end)
	if err := c.cfg.failing.bind(c, c.name, c.topo.Prefix); err != nil {
		return nil, err
	}
	return c, nil
}

// checkArguments checks NewConsumer's arguments but the options and
// Subscription.Owned, which depend on the options. Each error names the
// field (or argument) at fault.
func checkArguments[T any](name string, sub Subscription, named aggregate.NamedAggregate, sched schedulers.Scheduler,
	codec Codec[T], handler dispatch.Handler[partition.Delivery[T]]) error {
	var missing string
	switch {
	case name == "":
		return fmt.Errorf("%w: a consumer needs a name", ErrInvalidArgument)
	case sub.JetStream == nil:
		missing = "Subscription.JetStream"
	case codec.Decode == nil:
		missing = "Codec.Decode"
	case codec.ID == nil:
		missing = "Codec.ID"
	case named == nil:
		missing = "the named aggregate"
	case sched == nil:
		missing = "the scheduler"
	case handler == nil:
		missing = "the handler"
	}
	if missing != "" {
		return fmt.Errorf("%w: consumer %q: %s is nil", ErrInvalidArgument, name, missing)
	}
	if err := sub.Topology.validate(); err != nil {
		return fmt.Errorf("%w (consumer %q, Subscription.Topology)", err, name)
	}
	if err := checkVersion(sub.JetStream.Conn()); err != nil {
		return fmt.Errorf("%w (consumer %q)", err, name)
	}
	return nil
}

// gate lets an exchange through to handler only while its partition's
// lease is valid. One whose lease passed is not handled: gate waits for the
// loss that follows (the lease's death loses the partition, which forces
// it) and returns ErrLeaseLost, so its outcome is cancelled and its position
// is never acknowledged.
func gate[T any](handler dispatch.Handler[partition.Delivery[T]]) dispatch.Handler[partition.Delivery[T]] {
	return func(ctx context.Context, d partition.Delivery[T]) error {
		if l, ok := ctx.Value(leaseCtxKey{}).(*lease); ok && !l.valid() {
			<-ctx.Done()
			return fmt.Errorf("%w: partition %d, epoch %d: %w", ErrLeaseLost, d.Partition, l.epoch, ctx.Err())
		}
		return handler(ctx, d)
	}
}

// A Consumer is a component.Component: a Runtime prepares, starts and stops it.
var _ component.Component = (*Consumer[struct{}])(nil)

// validName reports whether s may be (part of) a consumer name.
func validName(s string) bool { return !strings.ContainsAny(s, ">*. /\\\t\r\n") }

// durable returns the name of partition p's durable consumer.
func (c *Consumer[T]) durable(p int32) string { return c.cfg.durable + "-" + strconv.Itoa(int(p)) }

// Name returns the name given to NewConsumer.
func (c *Consumer[T]) Name() string { return c.name }

// State returns the lifecycle state: StateStopped from ForceStop on (Done
// still waits for the goroutines).
func (c *Consumer[T]) State() component.State { return c.life.State() }

// Done is closed once the consumer stopped, every owned partition was
// released (and, after a graceful stop, its prefix acknowledged and
// confirmed) and every goroutine of it exited.
func (c *Consumer[T]) Done() <-chan struct{} { return c.life.Done() }

// Err returns the first failure, meaningful once Done is closed: a failed
// Start, a partition's failure (a rejected message, the server not back
// within the server loss timeout), a revocation that did not drain or whose
// acknowledgement was not confirmed.
func (c *Consumer[T]) Err() error { return c.life.Err() }

// Stats counts what the consumer did: messages fetched, acknowledgements
// sent (one per prefix move, cumulative), messages rejected and settled,
// redeliveries dropped (of positions a partition received already since its
// reset, in Fetched too), partitions reset while running (a delivery
// missed, a failed pull, a lost connection: see the package doc), and the
// exchanges' outcomes, summed over the partitions' dispatchers (those
// released included).
type Stats struct {
	Fetched, Acks, Rejected, Duplicates, Resets int64
	// Skipped counts messages not delivered because the partition's
	// finished map (written by its previous owner beside the ack floor)
	// records them finished: a crash replays only what had not finished.
	Skipped   int64
	Exchanges dispatch.Stats
	// Failures counts what the failure policy did (WithFailurePolicy).
	Failures partition.FailureStats
}

// Stats returns the counters: five atomic loads and one snapshot per
// partition opened (a part replaced by a reset is a kept sum), each
// consistent on its own (Received == Succeeded + Failed + Discarded +
// InFlight holds in the sum).
func (c *Consumer[T]) Stats() Stats {
	s := Stats{Fetched: c.fetched.Load(), Acks: c.acks.Load(), Rejected: c.reject.Load(), Duplicates: c.dups.Load(),
		Resets: c.resets.Load(), Skipped: c.skips.Load()}
	c.mu.Lock()
	opened := slices.Clone(c.opened)
	s.Exchanges = c.resetStats
	c.mu.Unlock()
	for _, pt := range opened {
		x := pt.in.Stats()
		s.Exchanges.Received += x.Received
		s.Exchanges.Succeeded += x.Succeeded
		s.Exchanges.Failed += x.Failed
		s.Exchanges.Discarded += x.Discarded
		s.Exchanges.InFlight += x.InFlight
	}
	s.Failures = c.disp.Failures()
	return s
}

// Owned returns the partitions owned now, in increasing order.
func (c *Consumer[T]) Owned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// record keeps err as Err() unless one was kept before.
func (c *Consumer[T]) record(err error) { c.life.Record(err) }

// fail records err and begins a graceful stop: a partition cannot go on, so
// the consumer drains and acknowledges what was handled, and ends with err.
func (c *Consumer[T]) fail(err error) {
	c.cfg.logger.Error("jetstream: consumer failed", slog.String("consumer", c.name), slog.Any("error", err))
	c.record(err)
	c.Quiesce()
}

// Prepare checks the server's version and the topology against the server,
// opens (or creates) the lease bucket and creates (or updates) the durable
// consumer of every owned partition (of every partition with a dynamic
// assignment); it pulls nothing. ctx bounds the requests; its values are
// kept for the handlers. Errors wrap ErrServerVersion, ErrUnreachable,
// ErrStreamNotFound, ErrSubjectsMismatch or ErrLeaseBucket (or ctx's error
// once ctx ended), and the consumer is stopped; from a state other than
// StateNew, or while another Prepare runs, ErrIllegalState
// (dispatch.ErrIllegalState too).
func (c *Consumer[T]) Prepare(ctx context.Context) error {
	if err := c.life.Step("prepare", component.StateNew); err != nil {
		return err
	}
	defer c.life.Leave()
	c.mu.Lock()
	c.runCtx, c.cancelRun = context.WithCancel(context.WithoutCancel(ctx))
	c.mu.Unlock()
	if err := c.setUp(ctx); err != nil {
		c.life.Record(err)
		c.life.Stop()
		return err
	}
	if !c.life.Advance(component.StateNew, component.StatePrepared) {
		return c.life.Refuse("prepare") // a stop came first; the end cancels the contexts
	}
	return nil
}

// durableConfig is partition p's durable consumer: pinned to its owner's
// pulls (the lease's holder). The pin's TTL is long, since the new owner
// unpins when it claims; a pin that times out while its owner holds the
// lease (no pull for that long: a handler blocked the partition) costs a
// replay from the ack floor.
func (c *Consumer[T]) durableConfig(p int32) natsjs.ConsumerConfig {
	cfg := natsjs.ConsumerConfig{
		Durable:       c.durable(p),
		FilterSubject: c.topo.Subject(p),
		AckPolicy:     natsjs.AckAllPolicy,
		AckWait:       c.cfg.ackWait,
		MaxAckPending: c.cfg.maxAckPending,
		DeliverPolicy: natsjs.DeliverAllPolicy,

		PriorityPolicy: natsjs.PriorityPolicyPinned,
		PriorityGroups: []string{pinGroup},
		PinnedTTL:      max(10*c.cfg.ttl, 30*time.Second),
	}
	return cfg
}

// setUp checks the server's version and the stream and makes the durable
// consumers.
func (c *Consumer[T]) setUp(parent context.Context) error {
	if err := checkVersion(c.js.Conn()); err != nil {
		return fmt.Errorf("%w (consumer %q)", err, c.name)
	}
	ctx, cancel := context.WithTimeout(parent, c.cfg.timeout)
	defer cancel()
	serverError := func(what string, err error) error {
		if parent.Err() != nil { // the caller's deadline or cancellation, not an unreachable server
			return fmt.Errorf("jetstream: consumer %q: %s: %w", c.name, what, err)
		}
		return c.serverError(what, err)
	}
	stream, err := c.js.Stream(ctx, c.topo.Stream)
	if err != nil {
		return serverError("stream "+strconv.Quote(c.topo.Stream), err)
	}
	if got, want := stream.CachedInfo().Config.Subjects, c.topo.Subjects(); !sameSet(got, want) {
		return fmt.Errorf("%w: consumer %q: stream %q has subjects %v, %d partitions need %s.0 ... %s.%d",
			ErrSubjectsMismatch, c.name, c.topo.Stream, got, c.topo.Partitions, c.topo.Prefix, c.topo.Prefix, c.topo.Partitions-1)
	}
	owned := c.owned
	if c.cfg.dynamic() {
		owned = make([]int32, c.topo.Partitions) // any may be claimed
		for p := range owned {
			owned[p] = int32(p)
		}
	}
	bucket := leaseBucket(c.cfg.durable)
	kv, err := openBucket(ctx, c.js, bucket, c.cfg.ttl)
	if err != nil {
		if errors.Is(err, ErrLeaseBucket) {
			return fmt.Errorf("%w (consumer %q)", err, c.name)
		}
		return serverError("lease bucket "+strconv.Quote(bucket), err)
	}
	c.lz = &leases{kv: kv, member: c.cfg.member, ttl: c.cfg.ttl, margin: c.cfg.ttl / 5,
		timeout: min(c.cfg.timeout, c.cfg.ttl/4), fence: !c.cfg.noFence, logger: c.cfg.logger, name: c.name}
	if c.cfg.finishedMap {
		if c.fm, err = openFinished(ctx, c.js, finishedBucket(c.cfg.durable)); err != nil {
			return serverError("finished map bucket "+strconv.Quote(finishedBucket(c.cfg.durable)), err)
		}
	}
	c.stream = stream
	for _, p := range owned {
		if _, err := stream.CreateOrUpdateConsumer(ctx, c.durableConfig(p)); err != nil {
			return serverError("durable consumer "+strconv.Quote(c.durable(p)), err)
		}
	}
	return nil
}

// serverError names what failed and maps the client's error to the
// package's sentinels.
func (c *Consumer[T]) serverError(what string, err error) error {
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		return fmt.Errorf("%w: consumer %q: %s: %w", ErrStreamNotFound, c.name, what, err)
	case unreachable(err):
		return fmt.Errorf("%w: consumer %q: %s: %w", ErrUnreachable, c.name, what, err)
	}
	return fmt.Errorf("jetstream: consumer %q: %s: %w", c.name, what, err)
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && len(slices.Compact(a)) == len(b)
}

// Start claims the lease of every owned partition, and of each it got
// unpins and resets the durable consumer to its ack floor + 1, assigns the
// partition to the dispatcher from there and starts pulling: five requests
// per partition, each bounded by the request timeout. A partition another
// member holds is claimed in the background, waited for up to the wait of
// WithStaticLease, then the consumer fails with ErrOwned. With a dynamic
// assignment it writes the member key and claims in the background instead
// (each claimed partition is opened the same way before its first pull).
// On a failure every partition started is lost (nothing acknowledged), the
// consumer is stopped and the error returned. From a state other than
// StatePrepared, or while another Start runs, ErrIllegalState
// (dispatch.ErrIllegalState too).
func (c *Consumer[T]) Start() error {
	if err := c.life.Step("start", component.StatePrepared); err != nil {
		return err
	}
	defer c.life.Leave()
	if !c.life.Advance(component.StatePrepared, component.StateRunning) {
		return c.life.Refuse("start") // a stop came first: nothing was started
	}
	started := make(chan struct{})
	c.life.Go("supervise", func() error { c.supervise(started); return nil }) // cannot fail: the Step holds
	defer close(started)

	var err error
	if c.cfg.dynamic() {
		if err = c.lz.join(c.runCtx); err != nil {
			err = c.serverError("member key "+strconv.Quote(memberKey(c.cfg.member)), err)
		}
	} else {
		err = c.claimOwned()
	}
	if err != nil {
		close(c.balanceStopped)
		c.record(err)
		c.ForceStop() // nothing of what was opened is acknowledged
		return err
	}
	c.mu.Lock()
	c.assigning = true
	c.mu.Unlock()
	component.Go(func() error { c.assign(); return nil }, func(err error) {
		if err != nil {
			c.fail(fmt.Errorf("jetstream: consumer %q: assigning: %w", c.name, err))
		}
	})
	return nil
}

// supervise waits for a stop and releases every partition still owned: by
// revocation, acknowledging the settled prefixes, or, after ForceStop, by
// loss; then it reaches the logical end (however it ends: Go's guard gives
// its hold back).
func (c *Consumer[T]) supervise(started <-chan struct{}) {
	defer c.life.Stop()
	<-started
	<-c.quit
	<-c.balanceStopped // no claim in progress, none to come
	c.mu.Lock()
	parts := make([]*part[T], 0, len(c.parts))
	for _, pt := range c.parts {
		parts = append(parts, pt)
	}
	clear(c.parts)
	c.mu.Unlock()
	for _, err := range component.GoEach(len(parts), func(i int) error {
		_, err := parts[i].release(c.drainCtx)
		return err
	}) {
		c.record(err)
	} // then the end waits for the Revokes, handoffs and losses still running
}

// goHeld runs f on a goroutine of its own, under the guard, and gives back
// the hold the caller took for it (Enter) when f ends, however it ends: a
// panic or runtime.Goexit of the user code f runs fails the consumer, its
// error naming what.
func (c *Consumer[T]) goHeld(what string, f func()) {
	component.Go(func() error { f(); return nil }, func(err error) {
		defer c.life.Release()
		if err != nil {
			c.fail(fmt.Errorf("jetstream: consumer %q: %s: %w", c.name, what, err))
		}
	})
}

// end is the finalizer: it runs once nothing of the consumer runs but the
// assigning goroutine (every hold given back: supervise's, each Revoke's,
// handoff's and loss's). The renewals stop (every lease was released, or is
// left to expire), the member key is deleted after a graceful stop, the
// dispatcher is closed (nothing is owned any more) and the contexts are
// released. It never runs on the assigning goroutine, which it waits for:
// that one gives back only the holds of its handoffs, while supervise still
// holds (it waits for balanceStopped).
func (c *Consumer[T]) end() {
	c.mu.Lock()
	assigning := c.assigning
	c.mu.Unlock()
	if assigning {
		close(c.stopRenew)
		<-c.assignDone
		if !c.life.Forced() && c.cfg.dynamic() {
			if err := c.lz.leave(c.runCtx); err != nil {
				c.cfg.logger.Warn("jetstream: member key not deleted", slog.String("consumer", c.name), slog.Any("error", err))
			}
		}
	}
	_, _ = c.disp.Close(c.drainCtx)
	c.mu.Lock()
	if c.cancelRun != nil {
		c.cancelRun()
	}
	c.mu.Unlock()
	c.cancelDrain()
}

// Quiesce begins a graceful stop, at once and without blocking: every
// partition stops fetching and drains (until ForceStop), then its prefix is
// acknowledged. Before Start it stops the consumer at once. Idempotent.
func (c *Consumer[T]) Quiesce() {
	from, first := c.life.Quiesce()
	if !first {
		return
	}
	c.quitOnce.Do(func() { close(c.quit) })
	if from < component.StateRunning {
		c.life.Stop() // nothing runs
	}
}

// StopGracefully quiesces and waits for Done, then returns Err(); if ctx
// ends first, an error wrapping ctx's naming the partitions still draining
// (the drain goes on; ForceStop cuts it short).
func (c *Consumer[T]) StopGracefully(ctx context.Context) error {
	c.Quiesce()
	return c.life.Await(ctx, func(err error) error {
		return fmt.Errorf("jetstream: consumer %q not stopped: partitions %v draining: %w", c.name, c.disp.Held(), err)
	})
}

// ForceStop stops at once: the partitions stop fetching, what they
// delivered and was not handled is discarded or cancelled, and nothing more
// is acknowledged; the state is StateStopped at once, and Done says when
// the last handler returned. Idempotent, safe at any time.
func (c *Consumer[T]) ForceStop() {
	if _, first := c.life.Force(); first {
		c.cancelDrain()
		c.mu.Lock()
		if c.cancelRun != nil {
			c.cancelRun()
		}
		c.mu.Unlock()
		c.quitOnce.Do(func() { close(c.quit) })
	}
}
