package flux

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/component"
)

// Time in flux: the schedulers package has no timer, so the time operators
// use the runtime's timers (time.Timer, time.Ticker, time.AfterFunc) owned by
// the subscription: each is stopped, and every goroutine a timer started
// is joined, before the subscription returns. Under testing/synctest they
// run on the bubble's fake clock, so a test of an hour of ticks takes no
// real time.

// Interval emits 0, 1, 2, ... one every period, the first period after the
// subscription, until the downstream stops or ctx ends (it never
// completes).
//
// The ticks come from a time.Ticker waited on by the subscribing goroutine,
// which also delivers the items: no goroutine. The ticks that come while
// the downstream is still busy with an item count as one, delivered as soon
// as it returns (the ticker's rule for slow receivers), and the values stay
// consecutive; add PublishOn to
// deliver on a scheduler.
// period <= 0 gives ErrInvalidArgument.
func Interval(period time.Duration) Flux[int] {
	if period <= 0 {
		return Error[int](invalid("Interval", "period not positive"))
	}
	return Flux[int]{subscribe: func(ctx context.Context, emit func(int) error) error {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-tick.C:
			}
			if err := emit(i); err != nil {
				return err
			}
		}
	}}
}

// Timer emits the single item 0 delay after the subscription, then
// completes; ctx ending first ends it with its cause. The wait is a
// time.Timer on the subscribing goroutine. delay < 0 gives
// ErrInvalidArgument; 0 emits at once.
func Timer(delay time.Duration) Flux[int] {
	if delay < 0 {
		return Error[int](invalid("Timer", "negative delay"))
	}
	return Flux[int]{subscribe: func(ctx context.Context, emit func(int) error) error {
		if err := sleep(ctx, time.NewTimer(delay)); err != nil {
			return err
		}
		return emit(0)
	}}
}

// DelayElements delivers each item d after it arrived, one at a time: the
// upstream is not asked for the next item until the delayed one was
// delivered, so items are at least d apart. Completion and errors are not
// delayed.
//
// The wait runs on the goroutine that delivers the item, on one time.Timer
// reused for every item: no goroutine, no allocation per item. An item
// waiting when ctx ends goes to the discard hook (DoOnDiscard) with
// the cause. d < 0 gives ErrInvalidArgument.
func (f Flux[T]) DelayElements(d time.Duration) Flux[T] {
	if d < 0 {
		return Error[T](invalid("DelayElements", "negative delay"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		return f.run(ctx, func(v T) error {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			if err := sleep(ctx, timer); err != nil {
				discard(v, err)
				return err
			}
			return emit(v)
		})
	}}
}

// sleep waits for t to fire (nil) or ctx to end (its cause, t stopped).
func sleep(ctx context.Context, t *time.Timer) error {
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		return context.Cause(ctx)
	}
}

// alarm calls a function once, d after it was armed, on a goroutine of
// the runtime's timer, unless it is disarmed first: exactly one of the two
// wins. wait joins every such goroutine. One arming at a time; each costs
// one timer. Each arming has its number, so that the goroutine of an
// earlier one, started by its timer just as it was disarmed, cannot take
// the place of a later one.
type alarm struct {
	mu    sync.Mutex
	t     *time.Timer
	gen   uint64 // the number of the last arming
	armed bool   // the last arming is pending
	fires sync.WaitGroup
}

// arm schedules fire after d, in place of any arming still pending.
func (a *alarm) arm(d time.Duration, fire func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disarmLocked()
	a.gen++
	gen := a.gen
	a.armed = true
	a.fires.Add(1)
	a.t = time.AfterFunc(d, func() {
		defer a.fires.Done()
		if a.claim(gen) {
			fire()
		}
	})
}

// claim is the firing's side of the race, for arming number gen.
func (a *alarm) claim(gen uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	won := a.armed && a.gen == gen
	if won {
		a.armed = false
	}
	return won
}

// disarm cancels the pending arming and reports whether it did so before
// the alarm fired; false also when nothing was armed.
func (a *alarm) disarm() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.disarmLocked()
}

func (a *alarm) disarmLocked() bool {
	if !a.armed {
		return false
	}
	a.armed = false
	if a.t.Stop() {
		a.fires.Done() // its function will never run
	}
	return true
}

// wait returns once no fire function of the alarm runs or can start:
// call it after the last disarm.
func (a *alarm) wait() { a.fires.Wait() }

// turn is the lock of state shared by the delivering goroutine and a
// timer's. The fast path, with nobody waiting, is two atomic operations. A
// goroutine that must wait parks on a channel of its own, so that it is
// durably blocked under testing/synctest (it would not be on a
// sync.Mutex), gives up when ctx ends, and is handed the lock in turn by
// give: a busy upstream cannot take it again before a waiting timer. It
// may be held across a call downstream, which keeps the items serial.
type turn struct {
	state  atomic.Int32 // 0 free, 1 held, 2 held and waiters are parked
	mu     sync.Mutex   // guards parked; never held while waiting
	parked []chan struct{}
}

func newTurn() *turn { return new(turn) }

// take waits for the lock, or for ctx to end (its cause, not locked).
func (t *turn) take(ctx context.Context) error {
	if t.state.CompareAndSwap(0, 1) {
		return nil
	}
	t.mu.Lock()
	for !t.state.CompareAndSwap(1, 2) && t.state.Load() != 2 {
		if t.state.CompareAndSwap(0, 1) {
			t.mu.Unlock()
			return nil
		}
	}
	me := make(chan struct{}, 1)
	t.parked = append(t.parked, me)
	t.mu.Unlock()
	select {
	case <-me:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if i := slices.Index(t.parked, me); i >= 0 {
		t.parked = slices.Delete(t.parked, i, i+1)
		if len(t.parked) == 0 {
			t.state.Store(1) // still held by the holder, nobody waits
		}
		t.mu.Unlock()
	} else {
		t.mu.Unlock()
		t.give() // handed to us meanwhile: pass it on
	}
	return context.Cause(ctx)
}

// hold waits for the lock whatever happens: the holder is bound to give
// it back.
func (t *turn) hold() { _ = t.take(context.Background()) }

// give releases the lock, or hands it to the first goroutine parked.
func (t *turn) give() {
	if t.state.CompareAndSwap(1, 0) {
		return
	}
	t.mu.Lock()
	if len(t.parked) == 0 {
		// The waiters gave up (their ctx ended) between the failed swap
		// and here; the last to leave marked the lock held: free it.
		t.state.Store(0)
		t.mu.Unlock()
		return
	}
	next := t.parked[0]
	t.parked = slices.Delete(t.parked, 0, 1)
	if len(t.parked) == 0 {
		t.state.Store(1) // held by next, nobody waits
	}
	t.mu.Unlock()
	next <- struct{}{}
}

// aside is the state shared by a delivering goroutine and a timer's
// goroutine that delivers too (BufferTimeout's timed slices, Sample's
// samples), guarded by lock. T is the upstream's item type, R the
// downstream's.
type aside[T, R any] struct {
	op      string
	uctx    context.Context         // the upstream's
	stop    context.CancelCauseFunc // ends it when a delivery of the timer's fails
	emit    func(R) error
	lock    *turn
	discard func(T, error)
	err     error // the downstream's error on a delivery of the timer's
}

func newAside[T, R any](op string, uctx context.Context, stop context.CancelCauseFunc, emit func(R) error) aside[T, R] {
	return aside[T, R]{op: op, uctx: uctx, stop: stop, emit: emit, lock: newTurn(), discard: discarder[T](uctx)}
}

// enter takes the lock for the upstream's item v, or discards v and
// returns why the flow is ending.
func (a *aside[T, R]) enter(v T) error {
	if err := a.lock.take(a.uctx); err != nil {
		a.discard(v, err)
		return err
	}
	if err := a.err; err != nil {
		a.lock.give()
		a.discard(v, err)
		return err
	}
	return nil
}

// deliver emits r on the timer's goroutine, under lock: a failure, a
// panic (as *PanicError) or a runtime.Goexit of the downstream is recorded
// and cancels the upstream.
func (a *aside[T, R]) deliver(r R) {
	err := component.Call(func() error { return a.emit(r) }, func(p *PanicError) { a.fail(exitedAs(a.op, p)) })
	if err != nil {
		a.fail(err)
	}
}

// fail records the downstream's error and cancels the upstream. Under lock.
func (a *aside[T, R]) fail(err error) {
	if a.err == nil {
		a.err = err
		a.stop(err)
	}
}

// end is the flow's end once the timer's goroutine is joined and the
// upstream returned uerr: on completion, flush delivers what is left
// (rest, not empty); otherwise rest is discarded with the reason.
func (a *aside[T, R]) end(uerr error, rest []T, flush func() error) error {
	err := a.err
	if err == nil {
		err = uerr
	}
	if err == nil {
		if len(rest) > 0 {
			return flush()
		}
		return nil
	}
	for _, v := range rest {
		a.discard(v, err)
	}
	return err
}
