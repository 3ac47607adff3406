package flux

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/component"
)

// DefaultGroupBuffer is the default capacity of each group's queue in
// GroupBy.
const DefaultGroupBuffer = 32

// DefaultStallBuffer is the default of WithStallBuffer, in items.
const DefaultStallBuffer = 256

// GroupOption configures GroupBy.
type GroupOption func(*groupOptions)

type groupOptions struct{ buffer, spare int }

// WithStallBuffer sets how many items, in all and beyond their group
// buffers, the groups waiting unsubscribed for their turn may hold when
// nothing else could move (default DefaultStallBuffer): GroupBy then queues
// the item rather than fail with ErrStalled, so that ConcatMap over runs of
// one key longer than the group buffer completes. Room taken is not given
// back within the subscription. n = 0 fails at the first such item; n < 0
// makes GroupBy fail with ErrInvalidArgument. Costs one stall check per
// item so queued.
func WithStallBuffer(n int) GroupOption {
	return func(o *groupOptions) { o.spare = n }
}

// WithGroupBuffer sets the capacity of each group's queue (default
// DefaultGroupBuffer); n < 1 makes GroupBy fail with ErrInvalidArgument. It
// is a hard bound per group, not a shared request budget.
func WithGroupBuffer(n int) GroupOption {
	return func(o *groupOptions) { o.buffer = n }
}

// GroupBy splits f into at most groups groups by key: keyOf(v) must be in
// [0, groups). The first item of key k opens group k, emitted downstream as
// a GroupedFlux; later items of k are queued for it.
//
// Threading: the upstream runs on the subscriber's goroutine (the router),
// which pushes each item into its group's queue. A FlatMap fed by GroupBy
// through synchronous operators only gets each new group from the router
// itself while it has a free slot, as from any synchronous source. Other
// groups (FlatMap at its concurrency, or any other downstream) are handed
// out, in the order they were opened, by a second goroutine of the
// subscription (the deliverer), started with the first of them, so that a
// downstream that runs a group to its end before taking the next
// (ConcatMap) or waits for a free slot (FlatMap) does not hold up the
// router: the groups opened meanwhile wait in GroupBy, buffering their
// items. That hand-off is synchronous too: after handing out a group, or
// pushing an item, the router pulls the next item only once the deliverer
// is idle again or some group's subscriber waits for an item, so a
// downstream that consumes a group inline sees the items exactly as if
// GroupBy called it directly (a group cancelled by its subscriber after one
// item, say, gets no second one). Each group is delivered on the goroutine
// that subscribes it, or on the worker of a PublishOn applied directly to
// the group flux, which then drains the group's queue in place (no second
// queue). A group flux is unicast. The deliverer has exited when the
// subscription returns; a runtime.Goexit in the downstream on it ends the
// flow with a *PanicError wrapping schedulers.ErrGoexit. Cost: at most one
// goroutine per subscription, one wake-up per group it hands out; per item,
// two atomic loads.
//
// Backpressure: each group holds at most the group buffer (WithGroupBuffer)
// of items, the one being delivered included; the router blocks while the
// target group is full, so at most groups*buffer+1 items, and the stall
// buffer (see Stalls), are pulled and not finished. A key outside [0, groups) (negative included) or a panic in keyOf
// ends the flow with an error wrapping ErrGroupKeyOutOfRange or a
// *PanicError.
//
// Termination: upstream completion completes every group once its queue is
// drained, and the main flux once every group opened was handed downstream;
// an upstream error reaches every group after its queued items, then the
// main flux. The groups not yet handed downstream when the upstream ends
// are handed out first, whatever the end. When a group's subscriber
// cancels, its queued items are discarded and the next item of that key
// opens a new group. Under FlatMap, whose inners run on goroutines of their
// own, the router goes on while an inner decides to cancel, so a group that
// takes n items may hold more by then, and those are discarded:
// FlatMap(GroupBy(Range(0, 10), v%2), g -> g.Take(1)) delivers 0 and 1 and
// discards 2 to 9. Use ConcatMap (inline) when every item must reach a
// group after such a cancel.
//
// Cancellation of the main flux: when its downstream stops early (Take or
// TakeUntil satisfied), the groups already handed out go on receiving their
// keys' items until the upstream ends or they are cancelled by their
// subscribers, and the upstream is cancelled once the last of them is; the
// groups opened but not handed out are cancelled, and the items of keys
// without a group handed out are given to the discard hook with
// ErrCancelled. The subscription returns, and Take completes, only once
// that is over: a subscription never outlives its call. A group handed out
// and never subscribed keeps the upstream going, and holds it once full,
// like any unconsumed group. When the downstream fails instead (it returned
// another error, or ctx ended), every group is cancelled at once: queued
// items go to the discard hook (DoOnDiscard) and the groups' subscribers
// get the error.
//
// Stalls: the router blocks while
// the group it pushes to is full and nobody consumes it. A FlatMap with a
// concurrency >= groups never stalls, for any key sequence. With a lower
// concurrency, or with ConcatMap (concurrency 1), the groups after the first
// ones wait unsubscribed for a slot or their turn while the inners running
// wait for the end of their own group, which only the upstream's end brings:
// once a waiting group is full, nothing can move but that group's next item.
// GroupBy then queues it beyond the group buffer, from a room of
// WithStallBuffer items shared by the subscription (at the default of 256,
// ConcatMap over 4 keys in runs of 85 each completes); once that room is used up it fails the flow with an error
// wrapping ErrStalled that names the full group and the groups the inners
// wait on, instead of hanging. The check is exact and uses
// no timer: it reports a stall only when the router waits for room in a
// group never subscribed and not handed out yet (or held by FlatMap waiting
// for a slot), the FlatMap or ConcatMap keeping the deliverer waiting takes
// the groups from GroupBy through synchronous operators only, and each of
// its inners is waiting for an item of its group (an inner busy with an
// item, however slow, is not), so that only the router could release any of
// them. It runs only on those transitions, nothing per item. Stalls it does
// not see hang until ctx ends: groups handed out and never
// subscribed (dropped by a Filter, kept by Collect), an asynchronous operator
// between GroupBy and the FlatMap or ConcatMap, inners that read their group
// through an asynchronous operator other than a PublishOn applied to the
// group flux itself, or that subscribe it from code of their own (in
// Create's function, say). Groups never subscribed keep their items until a
// late subscriber takes them (the main flow may have completed by then).
func GroupBy[T any](f Flux[T], keyOf func(T) int, groups int, opts ...GroupOption) Flux[GroupedFlux[T]] {
	o, err := groupOpts("GroupBy", opts)
	switch {
	case err != nil:
		return Error[GroupedFlux[T]](err)
	case keyOf == nil:
		return Error[GroupedFlux[T]](invalid("GroupBy", "nil key function"))
	case groups < 1:
		return Error[GroupedFlux[T]](invalid("GroupBy", "groups below 1"))
	}
	return Flux[GroupedFlux[T]]{subscribe: func(ctx context.Context, emit func(GroupedFlux[T]) error) error {
		return runBoard(ctx, f, groups, o, emit, func(b *board[T]) { b.keyOf = keyOf })
	}}
}

// groupOpts applies opts, checking them for operator op.
func groupOpts(op string, opts []GroupOption) (groupOptions, error) {
	o := groupOptions{buffer: DefaultGroupBuffer, spare: DefaultStallBuffer}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.buffer < 1:
		return o, invalid(op, "group buffer below 1")
	case o.spare < 0:
		return o, invalid(op, "negative stall buffer")
	}
	return o, nil
}

// runBoard runs one GroupBy subscription of groups places, init setting how
// items find theirs.
func runBoard[T any](ctx context.Context, f Flux[T], groups int, o groupOptions, emit func(GroupedFlux[T]) error, init func(*board[T])) error {
	uctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	direct, _ := ctx.(*flatFeed)
	b := &board[T]{
		ctx: ctx, uctx: uctx, stop: stop, buffer: o.buffer, spare: o.spare, emit: emit, direct: direct,
		discard: discarder[T](ctx), open: make([]*pipe[T], groups),
		wake: make(chan struct{}, 1), gate: make(chan struct{}, 1),
	}
	init(b)
	return b.run(f)
}

// board is the state of one GroupBy subscription, shared by its router and
// its deliverer.
type board[T any] struct {
	ctx     context.Context // the subscription's
	uctx    context.Context // the upstream's, cancelled once the main flux failed
	stop    context.CancelCauseFunc
	keyOf   func(T) int
	slotOf  func(T) (int, error) // GroupByKey's place of v's key in open, instead of keyOf
	tagOf   func(int) any        // GroupByKey's key of a place, for the group opened there
	buffer  int
	spare   int                        // room left beyond the buffers for groups waiting (WithStallBuffer); under mu
	emit    func(GroupedFlux[T]) error // the main flux's downstream
	direct  *flatFeed                  // the FlatMap fed by GroupBy through synchronous operators, if any
	discard func(T, error)
	open    []*pipe[T]    // the current group of each key; written by the router under mu
	exited  chan struct{} // closed when the deliverer exited; nil until it is started
	wake    chan struct{} // the deliverer's: a group was queued, or the upstream ended

	// The gate keeps the hand-off synchronous: the router pulls the next
	// item only while the deliverer has nothing to do (busy 0) or some
	// group's consumer waits for the router (idle > 0), the downstream
	// having parked on GroupBy. So a downstream that runs a group inline
	// sees the same items as if GroupBy called it directly.
	busy  atomic.Int32 // 1 from queuing a group until the deliverer emptied the queue
	idle  atomic.Int32 // consumers of this board's groups waiting for an item
	gated atomic.Bool  // the router waits on gate
	gate  chan struct{}

	mu      sync.Mutex
	queue   []*pipe[T] // opened, not yet handed downstream
	upDone  bool       // the upstream ended: nothing more will be queued
	mainErr error      // what the downstream of the main flux returned from emit
	stopped bool       // mainErr is an early stop (Take): the groups handed out go on
	live    int        // groups handed downstream and not cancelled

	// Stall detection (see stalledLocked).
	blocked  *pipe[T]    // the unsubscribed group the router waits for room in
	suspect  atomic.Bool // blocked is set: a consumer starting to wait checks
	w        *waiter     // the operator keeping the deliverer waiting
	wg       *pipe[T]    // the group it was given
	stallErr error
}

// run routes the upstream on the calling goroutine, then ends every group
// and joins the deliverer if it was started.
func (b *board[T]) run(f Flux[T]) error {
	uerr := f.run(b.uctx, b.route)
	b.mu.Lock()
	b.upDone = true
	reason := b.mainErr
	if b.stopped {
		reason = nil // the groups handed out get the upstream's end
	}
	if reason == nil {
		reason = b.stallErr
	}
	b.mu.Unlock()
	signal(b.wake)
	if reason == nil {
		reason = ctxDone(b.ctx)
	}
	b.end(reason, uerr)
	if b.exited != nil {
		<-b.exited
	}
	b.mu.Lock()
	merr, stopped := b.mainErr, b.stopped
	b.mu.Unlock()
	if merr == nil {
		return uerr
	}
	if !stopped {
		// The downstream failed, maybe after the upstream ended: the groups
		// it did not take will not be taken.
		b.end(merr, nil)
	}
	return merr
}

// startDeliverer starts the goroutine that hands out the queued groups;
// called by the router, once. What ends it is recorded by mainDone.
func (b *board[T]) startDeliverer() {
	b.exited = make(chan struct{})
	component.Go(func() error { b.mainDone(b.deliver()); return nil }, func(err error) {
		defer close(b.exited)
		if err != nil { // runtime.Goexit in the downstream: record it before dying
			b.mainDone(exitedAs("GroupBy", err))
		}
	})
}

// end cancels every open group with reason, or, reason nil, terminates them
// with the upstream's signal uerr. Called by the router once the upstream
// ended.
func (b *board[T]) end(reason, uerr error) {
	for _, g := range b.open {
		switch {
		case g == nil:
		case reason != nil:
			g.cancel(reasonOf(reason), false)
		default:
			g.terminate(uerr)
		}
	}
}

// route pushes v into the group of its key, opening one if needed.
func (b *board[T]) route(v T) error {
	var k int
	var err error
	if b.slotOf != nil {
		k, err = b.slotOf(v)
	} else if k, err = call1(b.keyOf, v); err == nil && (k < 0 || k >= len(b.open)) {
		err = fmt.Errorf("flux: GroupBy: key %d not in [0, %d): %w", k, len(b.open), ErrGroupKeyOutOfRange)
	}
	if err != nil {
		b.discard(v, err)
		return err
	}
	if g := b.open[k]; g != nil {
		if err := g.push(b.uctx, v); err != errGone {
			if err != nil {
				return err
			}
			return b.pass()
		}
	}
	// No group for k yet, or its subscriber cancelled: open one holding v.
	g := newPipe(b.buffer, b.discard)
	g.key, g.board = k, b
	if b.tagOf != nil {
		g.tag = b.tagOf(k)
	}
	_ = g.push(b.uctx, v) // an empty queue has room
	b.mu.Lock()
	if b.mainErr != nil {
		// The main flux is done: no new group.
		reason := b.mainErr
		b.mu.Unlock()
		g.cancel(reasonOf(reason), false)
		return ctxDone(b.uctx)
	}
	b.open[k] = g
	if b.direct != nil && len(b.queue) == 0 && b.busy.Load() == 0 && b.direct.free() {
		// FlatMap takes it at once and never runs it inline: hand it over
		// here, as a synchronous operator would (the deliverer is idle, so
		// the groups stay in order).
		g.handed = true
		b.live++
		b.mu.Unlock()
		if err := b.emit(b.grouped(g)); err != nil {
			b.mainDone(err)
			return ctxDone(b.uctx)
		}
		return nil
	}
	b.queue = append(b.queue, g)
	b.busy.Store(1)
	b.mu.Unlock()
	if b.exited == nil {
		b.startDeliverer()
	}
	signal(b.wake)
	return b.pass()
}

// grouped is the GroupedFlux of g.
func (b *board[T]) grouped(g *pipe[T]) GroupedFlux[T] {
	return GroupedFlux[T]{Key: g.key, Flux: Flux[T]{subscribe: g.consume, group: g}}
}

// pass returns once the router may pull the next item: at once unless the
// deliverer is busy and no consumer waits for the router. It returns the
// cause of uctx if uctx ended (the main flux failed, or ctx ended).
func (b *board[T]) pass() error {
	if b.busy.Load() == 0 || b.idle.Load() > 0 {
		return nil
	}
	if err := b.waitGate(); err != nil {
		return err
	}
	return ctxDone(b.uctx)
}

// waitGate blocks the router until the deliverer has nothing to do or a
// consumer waits for the router; it returns the cause of uctx if uctx ends
// first.
func (b *board[T]) waitGate() error {
	for {
		b.gated.Store(true)
		if b.busy.Load() == 0 || b.idle.Load() > 0 {
			b.gated.Store(false)
			return nil
		}
		select {
		case <-b.gate:
		case <-b.uctx.Done():
			b.gated.Store(false)
			return context.Cause(b.uctx)
		}
	}
}

// openGate wakes the router if it waits on the gate.
func (b *board[T]) openGate() {
	if b.gated.Load() {
		signal(b.gate)
	}
}

// deliver hands the opened groups downstream in order until the upstream
// ended and none is left, or the downstream returned an error.
func (b *board[T]) deliver() error {
	for {
		if err := ctxDone(b.ctx); err != nil {
			return err
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			done := b.upDone
			b.busy.Store(0)
			b.mu.Unlock()
			b.openGate()
			if done {
				return nil
			}
			select {
			case <-b.wake:
			case <-b.ctx.Done():
			}
			continue
		}
		g := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		g.handed = true
		b.live++
		b.mu.Unlock()
		if err := b.emit(b.grouped(g)); err != nil {
			return err
		}
	}
}

// mainDone records that the downstream of the main flux is done with err
// (nil: it took every group). The groups not handed downstream are
// cancelled, their items discarded. After an early stop (Take satisfied,
// ctx alive) the groups handed out go on receiving their items and the
// upstream is cancelled once they are all cancelled; after an error it is
// cancelled at once.
func (b *board[T]) mainDone(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	if b.mainErr != nil {
		b.mu.Unlock()
		return
	}
	b.mainErr = err
	b.stopped = isStop(err) && b.ctx.Err() == nil
	left := b.queue
	b.queue = nil
	cut := !b.stopped || b.live == 0
	b.mu.Unlock()
	if cut {
		b.stop(err) // before the gate opens, so that the router pulls nothing more
	}
	b.busy.Store(0)
	b.openGate()
	for _, g := range left {
		g.cancel(reasonOf(err), false)
	}
}

// cancelled is told by a group cancelled (by its subscriber or by GroupBy);
// the last group handed out going away after an early stop of the main flux
// ends the upstream.
func (b *board[T]) cancelled(g *pipe[T]) {
	b.mu.Lock()
	if !g.handed {
		b.mu.Unlock()
		return
	}
	g.handed = false
	b.live--
	cut := b.stopped && b.live == 0
	err := b.mainErr
	b.mu.Unlock()
	if cut {
		b.stop(err)
	}
}

// awaiter is implemented by GroupedFlux: FlatMap and ConcatMap tell the
// GroupBy a group comes from while they keep its deliverer waiting, so that
// GroupBy can tell a stall from a slow consumer.
type awaiter interface {
	// await reports w, with the group w was given; false: not a GroupBy
	// group, or w does not run on that GroupBy's deliverer (resume not
	// needed).
	await(w *waiter) bool
	resume(w *waiter)
}

// waiter is what FlatMap or ConcatMap keeps GroupBy's deliverer waiting for:
// the end of one of inners inners, all subscribed with scope.
type waiter struct {
	ctx    context.Context // the context the operator subscribed its upstream with
	scope  context.Context // the context of its inners: one *scope per subscription
	op     string
	inners int
	holds  bool // the group is held, not given to an inner yet (FlatMap waiting for a slot)
}

func (g GroupedFlux[T]) await(w *waiter) bool {
	return g.group != nil && g.group.board != nil && g.group.board.await(g.group, w)
}

func (g GroupedFlux[T]) resume(w *waiter) {
	b := g.group.board
	b.mu.Lock()
	if b.w == w {
		b.w, b.wg = nil, nil
	}
	b.mu.Unlock()
}

// await records w. It accepts only a waiter whose upstream context is the
// one GroupBy was subscribed with: operators subscribe their upstream with a
// context of their own (a *scope, a derived one) whenever they run it apart
// from the goroutine that calls them, so such a waiter runs on the
// deliverer, called from it through synchronous operators only, and blocks
// it.
func (b *board[T]) await(g *pipe[T], w *waiter) bool {
	if w.ctx != b.ctx {
		return false
	}
	b.mu.Lock()
	b.w, b.wg = w, g
	err := b.stalledLocked()
	b.mu.Unlock()
	b.stall(err)
	return true
}

// routerWaits records the unsubscribed group g the router waits for room in
// (nil: it stopped waiting) and checks for a stall.
func (b *board[T]) routerWaits(g *pipe[T]) {
	b.mu.Lock()
	b.blocked = g
	b.suspect.Store(g != nil)
	err := b.stalledLocked()
	b.mu.Unlock()
	b.stall(err)
}

// consumerWaits is told by a consumer starting to wait for an item.
func (b *board[T]) consumerWaits() {
	if !b.suspect.Load() {
		return
	}
	b.mu.Lock()
	err := b.stalledLocked()
	b.mu.Unlock()
	b.stall(err)
}

// stall ends the flow with err (nil: no stall): the router's wait ends with
// it, and then every group.
func (b *board[T]) stall(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	first := b.stallErr == nil
	if first {
		b.stallErr = err
	}
	b.mu.Unlock()
	if first {
		b.stop(err)
	}
}

// stalledLocked returns the ErrStalled error when the flow can never move
// again, nil otherwise. b.mu is held; the groups' locks are taken under it.
//
// The rule, all of which must hold at once:
//   - the router waits for room in a full group p that nobody subscribed;
//   - p was never handed downstream (it waits in the queue of groups), or is
//     held by the FlatMap that waits for a slot;
//   - the deliverer is kept waiting by a FlatMap at its concurrency (for an
//     inner to end) or a ConcatMap (for its inner to end), which called
//     await from the deliverer;
//   - every one of its inners has a consumer of one of our groups waiting
//     for an item, subscribed with its inners' scope.
//
// A consumer waiting for an item blocks the goroutine (or the drain task)
// of its inner, which only the router can release; one inner runs at most
// one such consumer at a time (operators that run two parts of a flow at
// once give one of them a context of its own). So no inner can end, no slot
// or turn comes, p is never subscribed and the router never gets room. Each
// transition towards this state (the router starts waiting, a consumer
// starts waiting, an operator reports) checks it, and the parts cannot
// change while it holds: only the router, or the end of ctx, can release
// any of them. A slow consumer is delivering an item, not waiting for one,
// and is never counted.
func (b *board[T]) stalledLocked() error {
	p, w := b.blocked, b.w
	if p == nil || w == nil || b.stallErr != nil || b.ctx.Err() != nil {
		return nil
	}
	if !(w.holds && b.wg == p) && !slices.Contains(b.queue, p) {
		return nil
	}
	p.mu.Lock()
	claimed, full := p.claimed, p.n == p.limit
	p.mu.Unlock()
	if claimed || !full {
		return nil
	}
	var waiting []string
	for _, g := range b.open {
		if g == nil || g == p {
			continue
		}
		g.mu.Lock()
		if g.idle && g.ctx == w.scope {
			waiting = append(waiting, g.label())
		}
		g.mu.Unlock()
	}
	if len(waiting) < w.inners {
		return nil
	}
	if b.spare > 0 {
		// Only this item moves the flow: queue it beyond the buffer.
		b.spare--
		p.mu.Lock()
		p.limit++
		p.full = false
		p.mu.Unlock()
		signal(p.space)
		return nil
	}
	inners := "its inner waits for items of group "
	if w.inners > 1 {
		inners = fmt.Sprintf("its %d inners wait for items of groups ", w.inners)
	}
	return fmt.Errorf("flux: GroupBy: group %s is full and not subscribed, and %s cannot take it: %s%s (stall buffer used up): %w",
		p.label(), w.op, inners, strings.Join(waiting, ", "), ErrStalled)
}
