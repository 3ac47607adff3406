package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// Dispatcher hands the deliveries of the partitions a consumer owns to one
// named aggregate's handler: one intake per owned partition, each a push-mode
// dispatch.Dispatcher with lanes of its own, all on one borrowed scheduler
// (the named aggregate's: its goroutines are shared by every partition). An
// exchange's group inside its partition is GroupKey(id, groups), independent
// of the key the broker partitions by. Each intake's outcome hook settles
// the partition's Tracker: handled exchanges finish their positions (a
// failed one as the FailurePolicy says: settled by default, with a WARN
// line), and discarded ones (or cancelled by a force: an error, a panic or a
// runtime.Goexit of the handler once Revoke or Lose forced) block the prefix
// below them.
//
// A binding (JetStream, Kafka) calls Assign when it gets a partition,
// Intake.Deliver for each record in order, acknowledges Intake.Prefix when
// Intake.Advanced signals, and Revoke (drain, then force, then settle) or
// Lose (force) when the partition goes. Safe for concurrent use. Cost per
// partition: its lanes (a pointer per group until used), its tracker, and
// two parked goroutines while it is owned.
type Dispatcher[T any] struct {
	name    string
	named   aggregate.NamedAggregate
	sched   schedulers.Scheduler
	idOf    func(T) string
	handler dispatch.Handler[Delivery[T]]
	cfg     config
	fail    *failures[T]

	mu     sync.Mutex
	owned  map[int32]*Intake[T]
	going  map[int32]int // partitions revoked or lost and not yet released: how many times
	closed bool
}

// Option configures NewDispatcher. No option involves the exchange type, so
// none takes a type argument. The zero (nil) Option is ignored.
type Option func(*config)

type config struct {
	groups, maxPending int
	maxHeld            int   // records held above the prefix (Tracker.SetBound)
	maxHeldBytes       int64 // bytes held above the prefix, 0: records only
	grace              time.Duration
	logger             *slog.Logger
	dispatch           []dispatch.Knob
	failure            FailurePolicy
	actions            FailureActions
	keyOrdering        bool
}

// WithGroups sets the number of groups of each partition (default
// aggregate.DefaultParallelism).
func WithGroups(n int) Option { return func(c *config) { c.groups = n } }

// WithMaxPending sets each partition's pending budget: at most n deliveries
// admitted and not finished (default dispatch.DefaultMaxPending). Deliver
// waits while it is used up, which is how a binding's fetch loop slows down.
func WithMaxPending(n int) Option { return func(c *config) { c.maxPending = n } }

// WithMaxHeld sets each partition's bound above its finished prefix: at
// most records positions held, finished or not, and bytes of them (as the
// binding sizes them at DeliverSize; 0: records only), by default
// DefaultMaxHeldRecords and DefaultMaxHeldBytes. It bounds what one stuck
// exchange makes a partition keep: everything delivered after it. Once
// either is reached the partition's Room is 0 and the binding stops
// fetching that partition (only) until both fell to half (Freed). A
// partition holds at most the bound plus one fetched batch; its pending
// budget (WithMaxPending, unfinished only) is a part of it, so pending <=
// min(pending budget, held). Costs nothing per record beyond Track's.
func WithMaxHeld(records int, bytes int64) Option {
	return func(c *config) { c.maxHeld, c.maxHeldBytes = records, bytes }
}

// WithForceGrace sets how long Revoke and Lose wait for the handlers a force
// cancelled before they give up with ErrNotDrained (default 1 s).
func WithForceGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithLogger sets the logger of the intakes and of tracker faults (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithDispatchOptions passes options to every partition's dispatcher:
// observers, outcome hooks, the failure log level, the error policy.
// WithScheduler, WithParallelism, WithMaxPending and WithLogger are the
// Dispatcher's to set. A hook given here (a dispatch.Option of
// Delivery[T], such as dispatch.WithOutcomeHook) is passed as a
// dispatch.Knob, so its exchange type is checked when a partition is
// assigned, not when the program compiles: one of another type makes
// Assign fail with dispatch.ErrInvalidOption naming both types.
func WithDispatchOptions(opts ...dispatch.Knob) Option {
	return func(c *config) { c.dispatch = append(c.dispatch, opts...) }
}

// NewDispatcher returns a Dispatcher named name for the exchanges of named,
// handled by handler on sched (borrowed: its owner disposes it after the
// Dispatcher closed); idOf gives an exchange's aggregate id, which picks its
// group. It starts nothing. Invalid arguments return ErrInvalidArgument.
func NewDispatcher[T any](name string, named aggregate.NamedAggregate, sched schedulers.Scheduler,
	idOf func(T) string, handler dispatch.Handler[Delivery[T]], opts ...Option) (*Dispatcher[T], error) {
	c := config{groups: aggregate.DefaultParallelism, maxPending: dispatch.DefaultMaxPending,
		maxHeld: DefaultMaxHeldRecords, maxHeldBytes: DefaultMaxHeldBytes, grace: time.Second, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case name == "" || named == nil || sched == nil || idOf == nil || handler == nil:
		return nil, fmt.Errorf("%w: a partition dispatcher needs a name, a named aggregate, a scheduler, an id function and a handler", ErrInvalidArgument)
	case c.groups < 1 || c.maxPending < 1 || c.grace < 0 || c.logger == nil:
		return nil, fmt.Errorf("%w: partition dispatcher %q: groups %d, max pending %d, grace %v", ErrInvalidArgument, name, c.groups, c.maxPending, c.grace)
	case c.maxHeld < 1 || c.maxHeldBytes < 0:
		return nil, fmt.Errorf("%w: partition dispatcher %q: max held %d records, %d bytes", ErrInvalidArgument, name, c.maxHeld, c.maxHeldBytes)
	}
	if err := c.failure.check(c.actions); err != nil {
		return nil, fmt.Errorf("%w (partition dispatcher %q)", err, name)
	}
	c.logger = component.GuardLogger(c.logger) // its tracker-fault lines too, not only the failures'
	f := newFailures(name, c.failure, c.actions, idOf, c.logger)
	if f.wrapped {
		handler = f.wrap(handler)
	}
	return &Dispatcher[T]{name: name, named: named, sched: sched, idOf: idOf, handler: handler, cfg: c, fail: f,
		owned: map[int32]*Intake[T]{}, going: map[int32]int{}}, nil
}

// Intake is one owned partition: its dispatcher and its tracker.
type Intake[T any] struct {
	p        int32
	d        *dispatch.Dispatcher[Delivery[T]]
	t        Tracker
	advanced chan struct{}
	logger   *slog.Logger
	f        *failures[T]
	forced   atomic.Bool   // a Revoke or Lose forces the dispatcher
	batch    []Delivery[T] // DeliverBatch's, reused: the delivering goroutine's only
}

// Assign starts owning partition p, whose next delivery is at position from
// or above (the committed position: the finished prefix + 1): its dispatcher
// is prepared with ctx's values and started. A partition owned already
// returns ErrAssigned; after Close, ErrClosed.
func (d *Dispatcher[T]) Assign(ctx context.Context, p int32, from int64) (*Intake[T], error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return nil, fmt.Errorf("%w: %q: assign partition %d", ErrClosed, d.name, p)
	case d.owned[p] != nil:
		return nil, fmt.Errorf("%w: %q: partition %d", ErrAssigned, d.name, p)
	}
	in := &Intake[T]{p: p, advanced: make(chan struct{}, 1), logger: d.cfg.logger, f: d.fail}
	in.t.Reset(from)
	in.t.SetBound(d.cfg.maxHeld, d.cfg.maxHeldBytes)
	groups := d.cfg.groups
	idOf := d.idOf
	opts := []dispatch.Option[Delivery[T]]{dispatch.WithLogger(d.cfg.logger)}
	for _, o := range d.cfg.dispatch {
		opts = append(opts, o)
	}
	opts = append(opts,
		dispatch.WithScheduler(d.sched),
		dispatch.WithParallelism(groups),
		dispatch.WithMaxPending(d.cfg.maxPending),
		dispatch.WithOutcomeHook(in.settle))
	if d.cfg.keyOrdering {
		opts = append(opts, dispatch.WithKeyOrderingBy(func(x Delivery[T]) string { return idOf(x.Exchange) }))
	}
	disp, err := dispatch.NewKeyed(d.name+"-"+strconv.Itoa(int(p)), d.named, nil,
		func(x Delivery[T]) int { return GroupKey(idOf(x.Exchange), groups) }, d.handler, opts...)
	if err != nil {
		return nil, fmt.Errorf("partition: %q: partition %d: %w", d.name, p, err)
	}
	if err := disp.Prepare(ctx); err != nil {
		return nil, fmt.Errorf("partition: %q: partition %d: %w", d.name, p, err)
	}
	if err := disp.Start(); err != nil {
		disp.ForceStop()
		return nil, fmt.Errorf("partition: %q: partition %d: %w", d.name, p, err)
	}
	in.d = disp
	d.owned[p] = in
	return in, nil
}

// settle is the intake's outcome hook: the failure policy says whether
// the position finished (see FailurePolicy).
func (in *Intake[T]) settle(ctx context.Context, r dispatch.Result[Delivery[T]]) {
	to := discarded
	if in.f.ended(ctx, &r, in.forced.Load()) {
		to = finished
	}
	err := in.t.endDirect(r.Exchange.seq, r.Exchange.Position, to)
	if to == finished {
		select {
		case in.advanced <- struct{}{}:
		default:
		}
	}
	if err != nil {
		in.logger.Error("partition: tracker refused an outcome", slog.Int("partition", int(in.p)),
			slog.Int64("position", r.Exchange.Position), slog.Any("error", err))
	}
}

// Partition returns the partition number.
func (in *Intake[T]) Partition() int32 { return in.p }

// Deliver tracks the record at position pos and hands it to its group. Call
// it from one goroutine per partition, in the broker's order (positions
// increasing). It waits while the partition's pending budget is used up, or
// until ctx ends. A position not above the last returns an error wrapping
// ErrOutOfOrder; once the partition is being revoked, an error wrapping
// dispatch.ErrStopped. A record that was tracked but not admitted (ctx
// ended while waiting, or the revocation began) is discarded in the
// tracker, so it is never acknowledged, and the prefix stays below it: the
// binding delivers it again only after Tracker().Reset at or below it (a
// consumer reset to the prefix), or leaves it to the next owner.
func (in *Intake[T]) Deliver(ctx context.Context, x T, pos int64, attempt int) error {
	return in.DeliverSize(ctx, x, pos, attempt, 0)
}

// DeliverSize is Deliver for a record of size bytes, which count in the
// partition's bound above the prefix (WithMaxHeld) until the prefix passes
// it.
func (in *Intake[T]) DeliverSize(ctx context.Context, x T, pos int64, attempt, size int) error {
	seq, err := in.t.trackDirect(pos, size)
	if err != nil {
		return fmt.Errorf("partition %d: %w", in.p, err)
	}
	err = in.d.Emit(ctx, Delivery[T]{Exchange: x, Partition: in.p, Position: pos, Attempt: attempt, seq: seq})
	if err != nil {
		_ = in.t.endDirect(seq, pos, discarded) // tracked just above and not admitted: it cannot fail
		return fmt.Errorf("partition %d: position %d: %w", in.p, pos, err)
	}
	return nil
}

// Record is one record of a DeliverBatch: the exchange at position
// Position of the partition, its delivery Attempt (as Deliver's) and its
// Size in bytes (as DeliverSize's; 0 counts no bytes).
type Record[T any] struct {
	Exchange T
	Position int64
	Attempt  int
	Size     int
}

// DeliverBatch is DeliverSize for a run of records in the broker's order
// (positions increasing), a fetch say: it tracks them all, then hands them
// to their groups with the dispatcher's EmitBatch, so that a hot group
// costs one hand-off per run of up to 256 records rather than one per
// record. It returns how many records were admitted, a prefix of recs.
// When err is not nil, recs[n:] were not admitted: those it tracked are
// discarded in the tracker, as Deliver discards; each of them, not only
// the first, counts in WithMaxHeld's bound, and Track refuses positions up
// to the last of them, until the Reset that delivers them again. A
// position not above the last stops the tracking there with an error
// wrapping ErrOutOfOrder (the records before it are delivered). It waits
// while the partition's pending budget is used up, or until ctx ends. Call
// it from the partition's one delivering goroutine, as Deliver. Allocates
// only when recs is longer than every batch before it (its deliveries'
// slice is kept for the next call).
func (in *Intake[T]) DeliverBatch(ctx context.Context, recs []Record[T]) (n int, err error) {
	ds, terr := trackBatch(&in.t, in.p, recs, in.batch[:0])
	in.batch = ds[:0]
	defer clear(ds) // the exchanges are not kept past the call; the slice is, for the next
	if len(ds) > 0 {
		n, err = in.d.EmitBatch(ctx, ds)
	}
	for _, d := range ds[n:] {
		_ = in.t.endDirect(d.seq, d.Position, discarded) // tracked just above and not admitted: it cannot fail
	}
	if err != nil {
		return n, fmt.Errorf("partition %d: position %d: %w", in.p, ds[n].Position, err)
	}
	if terr != nil {
		return n, fmt.Errorf("partition %d: %w", in.p, terr)
	}
	return n, nil
}

// Prefix returns the partition's finished prefix (see Tracker.Prefix).
func (in *Intake[T]) Prefix() (pos int64, ok bool) { return in.t.Prefix() }

// Advanced receives (at most one pending signal) after an exchange of the
// partition finished: the prefix may have moved. A binding acknowledges from
// its own goroutine when it receives.
func (in *Intake[T]) Advanced() <-chan struct{} { return in.advanced }

// Room returns how many more records the partition may fetch under its
// bound above the prefix (WithMaxHeld, Tracker.Room): 0 while the binding
// must not fetch it. Never blocks.
func (in *Intake[T]) Room() int { return in.t.Room() }

// Freed receives (at most one pending signal) when a partition whose Room
// was 0 fell to the low-water mark (half its bound) and may fetch again.
func (in *Intake[T]) Freed() <-chan struct{} { return in.t.Freed() }

// Tracker returns the partition's tracker, for Pending and Blocked.
func (in *Intake[T]) Tracker() *Tracker { return &in.t }

// Stats returns the partition's dispatcher's counters.
func (in *Intake[T]) Stats() dispatch.Stats { return in.d.Stats() }

// Settled is what a partition left when it was released: the finished
// prefix to acknowledge (none when ok is false), whether a force was needed,
// and the counters of its dispatcher.
type Settled struct {
	Partition int32
	Prefix    int64
	OK        bool
	Forced    bool
	Stats     dispatch.Stats
}

// Revoke releases partition p: its intake shuts (Deliver returns
// dispatch.ErrStopped from now on), the exchanges admitted drain until ctx
// ends, then the rest is forced (discarded, or cancelled), and Revoke waits
// for the handlers up to the force grace. It returns the settled prefix,
// which the binding acknowledges (commits) before it lets the partition go.
// With a handler still running after the grace, the error wraps
// ErrNotDrained: the prefix is still safe to acknowledge (it stops below
// that exchange), but the exchange may run on after the release. A
// partition not owned returns ErrNotAssigned.
func (d *Dispatcher[T]) Revoke(ctx context.Context, p int32) (Settled, error) {
	in, err := d.take(p)
	if err != nil {
		return Settled{Partition: p}, err
	}
	forced := false
	if in.d.StopGracefully(ctx) != nil && ctx.Err() != nil {
		// The deadline passed before the end: a force was needed if
		// exchanges were left, not when only goroutines were exiting.
		forced = in.d.Stats().InFlight > 0
		in.force()
	}
	return in.release(d, forced)
}

// Lose releases partition p by force, at once: what has not started is
// discarded and what runs is cancelled, and nothing of it may be
// acknowledged (the broker gave it to another owner already: Kafka's
// partitions lost). It waits for the handlers up to the force grace, then
// returns what is settled, for the record.
func (d *Dispatcher[T]) Lose(p int32) (Settled, error) {
	in, err := d.take(p)
	if err != nil {
		return Settled{Partition: p}, err
	}
	in.force()
	return in.release(d, true)
}

// force stops the partition's dispatcher by force; the outcomes that end
// from now on with a panic are discarded, not finished.
func (in *Intake[T]) force() {
	in.forced.Store(true)
	in.d.ForceStop()
}

// take removes p from the owned partitions.
func (d *Dispatcher[T]) take(p int32) (*Intake[T], error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.owned[p]
	if in == nil {
		return nil, fmt.Errorf("%w: %q: partition %d", ErrNotAssigned, d.name, p)
	}
	delete(d.owned, p)
	d.going[p]++
	return in, nil
}

// release waits for the end of the partition's dispatcher, up to the grace.
func (in *Intake[T]) release(d *Dispatcher[T], forced bool) (Settled, error) {
	defer func() {
		d.mu.Lock()
		if d.going[in.p]--; d.going[in.p] == 0 {
			delete(d.going, in.p)
		}
		d.mu.Unlock()
	}()
	var err error
	timer := time.NewTimer(d.cfg.grace)
	defer timer.Stop()
	select {
	case <-in.d.Done():
	case <-timer.C:
		err = fmt.Errorf("%w: %q: partition %d: %d pending", ErrNotDrained, d.name, in.p, in.t.Pending())
	}
	s := Settled{Partition: in.p, Forced: forced, Stats: in.d.Stats()}
	s.Prefix, s.OK = in.t.Prefix()
	return s, err
}

// Held returns, sorted, the partitions owned now and those being revoked
// or lost (taken out of Owned, their handlers not yet ended or given up):
// what a stop that times out is still waiting for.
func (d *Dispatcher[T]) Held() []int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := make([]int32, 0, len(d.owned)+len(d.going))
	for p := range d.owned {
		ps = append(ps, p)
	}
	for p := range d.going {
		if d.owned[p] == nil {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// Failures returns what the failure policy did, over every partition
// owned so far: a few atomic loads.
func (d *Dispatcher[T]) Failures() FailureStats { return d.fail.stats() }

// Owned returns the partitions owned now, in no order.
func (d *Dispatcher[T]) Owned() []int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := make([]int32, 0, len(d.owned))
	for p := range d.owned {
		ps = append(ps, p)
	}
	return ps
}

// Close refuses new assignments and revokes every owned partition at once
// under ctx; it returns what each settled and the errors joined.
func (d *Dispatcher[T]) Close(ctx context.Context) ([]Settled, error) {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	ps := d.Owned()
	settled := make([]Settled, len(ps))
	errs := component.GoEach(len(ps), func(i int) (err error) {
		settled[i], err = d.Revoke(ctx, ps[i])
		return err
	})
	return settled, errors.Join(errs...)
}

// WithKeyOrdering orders each partition's deliveries by aggregate id (the id
// function's) rather than by group: a slow or retried delivery holds back
// its own aggregate's next deliveries only, as Confluent Parallel
// Consumer's KEY order does (dispatch.WithKeyOrderingBy). The group still
// names the deliveries in results and logs. Cost: a map look-up and a
// second call of the id function per delivery.
func WithKeyOrdering() Option { return func(c *config) { c.keyOrdering = true } }
