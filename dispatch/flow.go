package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
)

// flow is the state one intake shares with the lanes it feeds: the gate
// (shut, forced), the counters, the pending budget and the drained signal.
// A Dispatcher has one flow for its lanes; a MainDispatcher one for all its
// children's.
//
// Counting protocol: an exchange is received once it is counted, exactly
// once, either by its publication into a lane (the lane queue's publication
// counter is the count: the one locked instruction of the producer's path)
// or, when it goes into no lane (refused, unrouted, dropped by a flux
// operator), in aside; every path that ends an exchange adds to a final
// counter after its count and before it looks at shut. drained closes only
// once shut is set, no Emit is between its look at shut and its count
// (emitting) and the source returned (waitSource): then no exchange can be
// counted after the decision, so whoever brings the in-flight count to zero
// sees it, and drained closes exactly when the intake is shut and no
// admitted exchange is left. The source's goroutine looks at shut before it
// routes an exchange without a fence between the look and the count; what
// orders its counts before the decision is that the decision waits for its
// return, after a force or a failure too (its context is cancelled then and
// its emits refused, so a source that honours its context returns at once).
//
// The fields are grouped by who writes them, each group on cache lines of
// its own, so that the intake's reads of the gate and its count do not miss
// on lines the consumers write.
type flow struct {
	shut, forced atomic.Bool // read per exchange, written by stops
	_            [56]byte

	aside    atomic.Int64 // exchanges received that went into no lane; written by the intake
	emitting atomic.Int64 // Emit calls past the gate, not yet counted
	_        [48]byte

	// queued returns how many exchanges were published into lanes so far:
	// the sum of the lanes' publication counters. Monotonic; it costs a load
	// per lane. Set before the intake starts.
	queued func() int64

	succeeded, failed, discarded atomic.Int64 // written by the consumers
	_                            [40]byte

	budget budget

	drainedOnce atomic.Bool
	waitSource  atomic.Bool // the drain waits until the source returned
	endMu       sync.Mutex  // orders the drained decision with beforeDrain
	drained     chan struct{}
	shutCh      chan struct{} // closed with shut, for waits on the budget
	onDrained   func()        // called once, right after drained closed
}

func newFlow(maxPending int, onDrained func()) *flow {
	f := &flow{drained: make(chan struct{}), shutCh: make(chan struct{}), onDrained: onDrained}
	f.budget.init(int64(maxPending))
	return f
}

// snapshot is stats read as one: received is read before and after the
// ended counters until the two agree, so that the counters held together at
// some moment between the reads and InFlight was really in flight then
// (never above the budget plus the exchange the intake refuses). Under a
// producer that moves received at every try, the last try's reading, whose
// InFlight is over by what was received during that one try. An atomic
// load per lane and a few more, per try; for Stats, not for the path.
func (f *flow) snapshot() Stats {
	for try := 0; ; try++ {
		r := f.received()
		if s := f.stats(); s.Received == r || try == 16 {
			return s
		}
	}
}

// stats returns a snapshot in which the identity of Stats holds: the final
// counters are read before received.
func (f *flow) stats() Stats {
	s := Stats{Succeeded: f.succeeded.Load(), Failed: f.failed.Load(), Discarded: f.discarded.Load()}
	s.Received = f.received()
	s.InFlight = s.Received - s.Succeeded - s.Failed - s.Discarded
	return s
}

// received returns how many exchanges were received: those in lanes and
// those aside. Each count is taken before the exchange's final counter, and
// both parts only grow, so that read after the final counters it is at
// least their sum.
func (f *flow) received() int64 {
	n := f.aside.Load()
	if f.queued != nil {
		n += f.queued()
	}
	return n
}

// close shuts the intake: nothing is admitted from now on.
func (f *flow) close() {
	f.gate()
	f.check()
}

// gate is close without looking for the end: a force shuts the intake
// before it cancels the handlers, so that the room their ends free in the
// budget is not taken by the intake meanwhile, and looks after.
func (f *flow) gate() {
	if !f.shut.Swap(true) {
		close(f.shutCh)
	}
}

// check closes drained once the intake is shut and nothing is in flight.
// Call it after every change that may have ended the last exchange.
// Emit counts itself in emitting before it looks at shut and leaves it only
// after adding to received, so emitting is read first: an Emit is either
// seen there, or its count in received, or it saw shut.
// The decision is taken again under endMu, so that an exchange beforeDrain
// admitted after the shut is seen. It waits for the source to return
// (waitSource): an item the source took and has not emitted yet is not lost
// to the end, and no exchange the source routes is counted after it.
// It waits for the budget's units too: a consumer adds to the final
// counters before it gives its units back, and every release is followed by
// a check, so Budget reads 0 once Done is closed.
// After the shut, once no budget unit is taken (an admitted exchange holds
// one until it ended), it sums the lanes' counters: a load per lane, taken
// about once per drain rather than once per settle (WithKeyOrdering keeps
// thousands of lanes). Reading the budget before the counters is safe only
// because every admission takes its unit inside emitting or before the
// source returned (waitSource), both read first: a new admission path must
// stay inside one of them.
func (f *flow) check() {
	if !f.shut.Load() || f.waitSource.Load() || f.emitting.Load() != 0 || f.budget.pending.Load() != 0 ||
		f.drainedOnce.Load() || f.stats().InFlight != 0 {
		return
	}
	f.endMu.Lock()
	last := f.emitting.Load() == 0 && f.budget.pending.Load() == 0 && f.stats().InFlight == 0 && !f.drainedOnce.Swap(true)
	f.endMu.Unlock()
	if !last {
		return
	}
	close(f.drained)
	if f.onDrained != nil {
		f.onDrained()
	}
}

// beforeDrain reports whether drained has not closed, for an exchange
// already counted in received after the shut: once it returns true, drained
// waits until that exchange ended, since check decides under the same lock
// and then sees it in received.
func (f *flow) beforeDrain() bool {
	f.endMu.Lock()
	defer f.endMu.Unlock()
	return !f.drainedOnce.Load()
}

// budget bounds the exchanges admitted and not finished. acquire takes a
// unit only while pending is below the limit; otherwise it announces itself
// as a waiter, looks again, and waits for room on a channel (so that
// testing/synctest sees the wait). release subtracts, then wakes a waiter if
// one is announced; a waiter that gets in wakes the next one while room is
// left. Since a waiter announces itself before it looks again and a
// releaser subtracts before it looks for waiters, no wake-up is lost.
type budget struct {
	pending atomic.Int64
	_       [56]byte
	max     int64
	waiters atomic.Int32
	room    chan struct{}
}

func (b *budget) init(max int64) {
	b.max, b.room = max, make(chan struct{}, 1)
}

// tryTakeUpTo takes up to n free units (at least one) and returns how many,
// or 0 when none is free.
func (b *budget) tryTakeUpTo(n int64) int64 {
	for {
		p := b.pending.Load()
		free := b.max - p
		if free <= 0 {
			return 0
		}
		n = min(n, free)
		if b.pending.CompareAndSwap(p, p+n) {
			return n
		}
	}
}

// acquire takes one unit, waiting while the budget is used up; it returns
// ctx's cause, or errIntakeClosed once stop is closed, holding no unit.
func (b *budget) acquire(ctx context.Context, stop <-chan struct{}) error {
	_, err := b.acquireUpTo(ctx, stop, 1)
	return err
}

// acquireUpTo takes up to n units, at least one, waiting while none is
// free; it returns how many, or, holding none, ctx's cause or
// errIntakeClosed once stop is closed.
func (b *budget) acquireUpTo(ctx context.Context, stop <-chan struct{}, n int64) (int64, error) {
	if got := b.tryTakeUpTo(n); got > 0 {
		return got, nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	for {
		if got := b.tryTakeUpTo(n); got > 0 {
			b.wake() // room may be left for the next waiter
			return got, nil
		}
		select {
		case <-b.room:
		case <-ctx.Done():
			b.wake() // pass on a wake-up this waiter may have taken
			return 0, context.Cause(ctx)
		case <-stop:
			b.wake()
			return 0, errIntakeClosed
		}
	}
}

// release gives n units back.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.pending.Add(-n)
	b.wake()
}

// wake signals a waiter, if any is announced and there is room.
func (b *budget) wake() {
	if b.waiters.Load() > 0 && b.pending.Load() < b.max {
		select {
		case b.room <- struct{}{}:
		default:
		}
	}
}
