package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
)

// part is one owned partition: its durable consumer,
// its intake in the partition.Dispatcher, the messages held until
// acknowledged, and its two goroutines.
type part[T any] struct {
	c    *Consumer[T]
	p    int32
	cons natsjs.Consumer
	// stop ends the fetching: release cancels it.
	stop       context.Context
	cancelStop context.CancelFunc
	in         *partition.Intake[T]
	held       held
	poke       chan struct{} // a rejected message settled: the prefix may have moved

	stopAck            chan struct{}
	fetchDone, ackDone chan struct{}
	lastAcked          natsjs.Msg // the acknowledging goroutine's, then release's
	lastAckedPos       int64
	// seen is the last position the durable consumer had delivered before
	// the reset: a reset restarts the server's delivery count, so a
	// position at or below it is counted as a second attempt at least.
	seen int64
	from int64 // the first position expected, after the reset
	// last is the highest position taken since the reset (from - 1 at
	// first); next is the consumer sequence the next delivery must carry:
	// the server numbers its deliveries 1, 2, ... from the reset, so while
	// they come without a gap every delivery since the reset reached this
	// partition (0: not checked, without a reset).
	last int64
	next uint64
	// lease is the partition's claim (with either assignment; nil: none);
	// lost says the partition is lost (its lease passed, was taken, or its
	// pull was refused): it is released without acknowledging more.
	lease *lease
	lost  atomic.Bool
	// pending is the last delivery's NumPending: what the server had left
	// to deliver after it (Lag).
	pending atomic.Uint64
	// reopening says a reset releases the partition to open it again: its
	// lease stays (set before the release, on the fetching goroutine).
	reopening bool
	// The finished map (finished.go): what the previous owner finished
	// (the fetching goroutine's), and the acknowledging goroutine's last
	// write, its time, the timer of a write put off, and the consumer's tag.
	skip     partition.FinishedMap
	mapLast  string
	mapAt    time.Time
	mapTimer *time.Timer
	mapTag   string
	mapBase  int64 // the base of the last call
}

// valid reports whether the partition may still deliver and acknowledge:
// while its lease is valid (always without one).
func (pt *part[T]) valid() bool { return pt.lease == nil || pt.lease.valid() }

// pullExpiry is how long one fetch waits on the server for its batch to
// fill; what arrives meanwhile is delivered as it comes. A variable for the
// tests only.
var pullExpiry = 5 * time.Second

// open resets partition p's durable consumer cons to its ack floor + 1,
// assigns the partition from there, under lease l (nil with a static
// assignment), which the handlers' ctx carries.
func (c *Consumer[T]) open(p int32, cons natsjs.Consumer, l *lease) (*part[T], error) {
	ctx, cancel := context.WithTimeout(c.runCtx, c.cfg.timeout)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, c.serverError("durable consumer "+c.durable(p), err)
	}
	from := int64(info.AckFloor.Stream) + 1
	if l != nil && !l.valid() {
		// A reset sent once the lease passed (this member stalled while
		// claiming) would move the next owner's delivery back under it.
		return nil, errLeasePassed
	}
	if c.cfg.openFault != nil {
		if err := c.cfg.openFault(p); err != nil {
			return nil, c.serverError("reset of durable consumer "+c.durable(p), err)
		}
	}
	if !c.cfg.noReset {
		res, err := c.js.ResetConsumer(ctx, c.topo.Stream, c.durable(p))
		if err != nil {
			return nil, c.serverError("reset of durable consumer "+c.durable(p), err)
		}
		from = max(from, int64(res.ResetSeq))
	}
	next := uint64(1) // the reset numbers the deliveries from 1 again
	if c.cfg.noReset {
		next = 0
	}
	actx := c.runCtx
	if l != nil {
		actx = context.WithValue(actx, leaseCtxKey{}, l)
	}
	in, err := c.disp.Assign(actx, p, from)
	if err != nil {
		return nil, fmt.Errorf("jetstream: consumer %q: %w", c.name, err)
	}
	skip := c.readFinished(ctx, p, info, from)
	stop, cancelStop := context.WithCancel(c.runCtx)
	c.mu.Lock()
	// A reset restarts the server's delivery count, which a server restart
	// may have lost too: what this process received before counts as
	// delivered, whether this part follows a reset or a loss.
	seen := max(int64(info.Delivered.Stream), c.received[p])
	c.mu.Unlock()
	return &part[T]{c: c, p: p, cons: cons, stop: stop, cancelStop: cancelStop, in: in, poke: make(chan struct{}, 1), seen: seen,
		stopAck: make(chan struct{}), fetchDone: make(chan struct{}), ackDone: make(chan struct{}), lease: l, from: from,
		last: from - 1, next: next, skip: skip, mapTag: strconv.FormatInt(info.Created.UnixNano(), 10)}, nil
}

// run starts the partition's goroutines; release joins them.
func (pt *part[T]) run() {
	component.Go(func() error { pt.fetch(); return nil }, func(err error) { pt.ended(err); close(pt.fetchDone) })
	component.Go(func() error { pt.acknowledge(); return nil }, func(err error) { pt.ended(err); close(pt.ackDone) })
}

// ended fails the consumer if one of the partition's goroutines ended by a
// panic or runtime.Goexit of the user code it runs (the decoder, the id
// function, the reject hook, the logger): the partition no longer fetches
// or acknowledges.
func (pt *part[T]) ended(err error) {
	if err != nil {
		pt.c.fail(fmt.Errorf("jetstream: consumer %q: partition %d: %w", pt.c.name, pt.p, err))
	}
}

// fetch pulls the partition's messages in batches of at most the fetch
// batch and the room under the partition's bound (WithMaxHeld) and
// delivers them in order, until release stops it, the intake shuts, or the
// partition fails. (One pull request per batch, rather than
// the client's prefetching iterator, whose next pull can be skipped when
// the previous one is still being sent as its last message arrives: the
// partition then stalls until the pull expires.)
func (pt *part[T]) fetch() { pt.pull() }

// pull is fetch's loop. Each pull asks the server for a batch and expires
// on the server (pullExpiry), which then ends it with a status after
// everything it delivered: the loop reads until the batch closes, so that
// nothing received is dropped by a deadline of the client's racing the
// server's (a process paused across the expiry would find both ready). Only
// a stop or a lost connection cancels a pull; a lost connection, a failed
// pull and a delivery the partition missed reset it (reset).
//
// A pull that nats.go ended itself may still be served by the server after
// that (its request reached the server late, or waits in the consumer's
// queue), and what it delivers is dropped. The server serves a consumer's
// pull requests in the order they came, so the next pull that the server
// ends comes after every delivery to the one given up: the server's count
// of deliveries is asked for then (continuous), not before.
func (pt *part[T]) pull() {
	c := pt.c
	nc := c.js.Conn()
	down := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer nc.RemoveStatusListener(down)
	opts := []natsjs.FetchOpt(nil)
	if pt.lease != nil {
		opts = append(opts, natsjs.FetchPriorityGroup(pinGroup))
	}
	givenUp := false // a pull given up since the count of deliveries was last taken
	for pt.stop.Err() == nil {
		if !pt.valid() {
			c.lose(pt, "its lease passed")
			return
		}
		if !nc.IsConnected() {
			c.reset(pt, "the connection is down")
			return
		}
		// The bound above the prefix (WithMaxHeld): ask for no more than it
		// has room for, and for nothing while it is reached.
		n := min(c.cfg.batch, pt.in.Room())
		if n == 0 {
			select {
			case <-pt.in.Freed():
			case <-pt.stop.Done():
			}
			continue
		}
		ctx, cancel := context.WithCancel(pt.stop)
		pctx := expiring(ctx)
		if c.cfg.racingPull {
			pctx, cancel = context.WithTimeout(pt.stop, pullExpiry)
		}
		began := time.Now()
		batch, err := pt.cons.Fetch(n, append(opts, natsjs.FetchContext(pctx))...)
		if err != nil {
			cancel()
			if pt.stop.Err() == nil {
				c.reset(pt, "pulling: "+err.Error())
			}
			return
		}
		ok, lost := true, false
		msgs := batch.Messages()
	read:
		for {
			select {
			case msg, more := <-msgs:
				if !more {
					break read
				}
				c.fetched.Add(1)
				if ok = pt.handle(msg); !ok {
					break read
				}
			case <-down:
				// What was on its way when the connection broke is lost,
				// though the server counts it delivered.
				lost = true
				break read
			}
		}
		cancel()
		for range msgs { // the fetch's goroutine ends once it closed them
		}
		err = batch.Error()
		switch {
		case !ok || pt.stop.Err() != nil:
			return
		case lost:
			c.reset(pt, "the connection was lost")
			return
		case errors.Is(err, natsjs.ErrPinIDMismatch) && pt.lease != nil:
			if !c.cfg.noFence {
				// The server unpinned this owner: another member claimed
				// the partition (or the pin timed out). Nothing more of it
				// is this process's to acknowledge.
				c.lose(pt, "its pull was refused (pin id mismatch)")
				return
			}
			// the control goes on, unpinned
		case err == nil && time.Since(began) < pullExpiry+time.Second:
			// The server ended the pull: its status comes after every
			// delivery of the pull, and of a pull given up before it.
			if givenUp && !pt.continuous() {
				return
			}
			givenUp = false
		case err == nil, c.cfg.racingPull && errors.Is(err, context.DeadlineExceeded):
			// nats.go ended the pull itself (silent for its expiry + 1 s,
			// or the tests' client deadline), dropping what it received
			// meanwhile, and the server may still deliver to it: the
			// server's count of deliveries tells, after the next pull.
			givenUp = true
		case err != nil:
			c.reset(pt, "pulling: "+err.Error())
			return
		}
	}
}

// continuous asks the server whether every delivery since the reset
// reached the partition, between two pulls, once the server ended a pull
// after the last one given up (so no delivery is on its way); if not, or if
// the server cannot tell, the partition resets and continuous returns
// false. One request.
func (pt *part[T]) continuous() bool {
	c := pt.c
	if pt.next == 0 {
		return true // the control without the reset counts nothing
	}
	ctx, cancel := context.WithTimeout(pt.stop, c.cfg.timeout)
	defer cancel()
	info, err := pt.cons.Info(ctx)
	switch {
	case pt.stop.Err() != nil:
		return false
	case err != nil:
		c.reset(pt, "the server's count of deliveries unknown: "+err.Error())
		return false
	case info.Delivered.Consumer >= pt.next:
		c.reset(pt, "deliveries the partition did not receive", slog.Uint64("expected", pt.next),
			slog.Uint64("delivered", info.Delivered.Consumer))
		return false
	}
	return true
}

// expiring gives a pull its server-side expiry: FetchContext takes the
// request's expiry from its context's deadline (the time left less a tenth
// of it, at most 1 s) and cannot be combined with FetchMaxWait, so this
// context reports a deadline that makes the expiry pullExpiry (up to 9 s),
// but is cancelled only with ctx, never by that deadline: the server ends
// the pull.
func expiring(ctx context.Context) context.Context {
	return pullContext{ctx, time.Now().Add(pullExpiry + pullExpiry/9)}
}

type pullContext struct {
	context.Context
	deadline time.Time
}

func (c pullContext) Deadline() (time.Time, bool) { return c.deadline, true }

// handle delivers one message; false means the partition stops fetching.
func (pt *part[T]) handle(msg natsjs.Msg) bool {
	c := pt.c
	meta, err := msg.Metadata()
	if err != nil {
		c.fail(fmt.Errorf("jetstream: consumer %q: partition %d: %w", c.name, pt.p, err))
		return false
	}
	pos, attempt := int64(meta.Sequence.Stream), int(meta.NumDelivered)
	pt.pending.Store(meta.NumPending)
	if pos <= pt.seen {
		attempt = max(attempt, 2)
	}
	if !pt.valid() {
		c.lose(pt, "its lease passed")
		return false
	}
	if pt.next != 0 {
		if seq := meta.Sequence.Consumer; seq != pt.next {
			if c.cfg.noFence {
				pt.missed(seq) // the control of the fence takes the sequence as it is
			} else {
				// A delivery since the reset did not reach the partition (it
				// went to a pull given up, or to another client), or the
				// consumer was reset by another: acknowledging above the
				// hole could acknowledge a position never handled.
				c.reset(pt, "a delivery missed the partition", slog.Uint64("expected", pt.next), slog.Uint64("sequence", seq),
					slog.Int64("position", pos))
				return false
			}
		} else if pt.next++; pos <= pt.last {
			// The server redelivers a position this partition received
			// since the reset: a delivery it had queued for a pull request
			// given up (another owner's, one before the reset) failed, or an
			// ack wait passed. Handled (or handling) already, in order: drop it.
			c.dups.Add(1)
			return true
		}
	}
	pt.last = max(pt.last, pos)
	if pt.skip.Contains(pos) {
		return pt.skipped(msg, pos)
	}
	x, err := pt.decode(msg, pos)
	if err != nil {
		return pt.rejected(msg, pos, err)
	}
	pt.held.push(pos, msg)
	err = pt.in.DeliverSize(c.runCtx, x, pos, attempt, len(msg.Data()))
	if (c.cfg.noReset || c.cfg.noFence) && errors.Is(err, partition.ErrOutOfOrder) {
		// The controls: take the server's redelivery as it comes (without
		// the fence, a stalled member's late reset moves the owner's
		// delivery back under it, and the control goes on).
		pt.in.Tracker().Reset(pos)
		err = pt.in.DeliverSize(c.runCtx, x, pos, attempt, len(msg.Data()))
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, partition.ErrOutOfOrder), errors.Is(err, partition.ErrBroken):
		// A redelivery behind the last position: handled (or handling)
		// already, so not acknowledged since, or never received.
		c.reset(pt, "a redelivery behind the last position", slog.Int64("position", pos), slog.Int64("last", pt.last),
			slog.Int("attempt", attempt))
	case errors.Is(err, dispatch.ErrStopped), c.runCtx.Err() != nil:
		// revoked or forced: the message stays unacknowledged
	default:
		c.fail(fmt.Errorf("jetstream: consumer %q: %w", c.name, err))
	}
	return false
}

// missed is the control's (WithoutFence) take on a delivery whose consumer
// sequence seq is not the one expected: it goes on from seq, as a consumer
// without the reset would.
func (pt *part[T]) missed(seq uint64) {
	c := pt.c
	c.cfg.logger.Warn("jetstream: a delivery missed the partition", slog.String("consumer", c.name),
		slog.Int("partition", int(pt.p)), slog.Uint64("sequence", seq), slog.Uint64("expected", pt.next))
	pt.next = seq + 1
}

// decode reads the key and decodes msg, recovering the decoder's panic.
func (pt *part[T]) decode(msg natsjs.Msg, pos int64) (x T, err error) {
	c := pt.c
	key := msg.Headers().Get(KeyHeader)
	if key == "" {
		return x, fmt.Errorf("%w: consumer %q: partition %d: stream sequence %d, subject %q",
			ErrMissingKey, c.name, pt.p, pos, msg.Subject())
	}
	if x, err = decodeCaught(c.decode, key, msg); err != nil {
		err = fmt.Errorf("%w: consumer %q: partition %d: stream sequence %d, key %q: %w", ErrDecode, c.name, pt.p, pos, key, err)
	}
	return x, err
}

// rejected hands a message that cannot be delivered to the reject hook: the
// consumer stops without one, or when it fails; else the message's position
// is settled as finished.
func (pt *part[T]) rejected(msg natsjs.Msg, pos int64, reason error) bool {
	c := pt.c
	if c.cfg.reject == nil {
		c.fail(reason)
		return false
	}
	if err := protect(func() error { return c.cfg.reject(c.runCtx, msg, reason) }); err != nil {
		c.fail(fmt.Errorf("jetstream: consumer %q: partition %d: reject hook: %w (rejecting: %w)", c.name, pt.p, err, reason))
		return false
	}
	c.reject.Add(1)
	t := pt.in.Tracker()
	if err := t.Track(pos); err != nil {
		c.reset(pt, "a redelivery behind the last position", slog.Int64("position", pos), slog.Any("error", err))
		return false
	}
	pt.held.push(pos, msg)
	_ = t.Finish(pos) // tracked just above: it cannot fail
	select {
	case pt.poke <- struct{}{}:
	default:
	}
	return true
}

// decodeCaught calls decode, returning its panic as a *PanicError (a
// runtime.Goexit goes on, to the partition's guard).
func decodeCaught[T any](decode func(string, natsjs.Msg) (T, error), key string, msg natsjs.Msg) (x T, err error) {
	defer component.Catch(&err)
	return decode(key, msg)
}

// protect calls f, returning its panic as a *PanicError (a runtime.Goexit
// goes on, to the partition's guard).
func protect(f func() error) error { return component.Call(f, nil) }

// acknowledge acknowledges the finished prefix each time it may have moved,
// with one cumulative acknowledgement (not waited for: a lost one is covered
// by the next, and release confirms the last), until release stops it.
func (pt *part[T]) acknowledge() {
	var dead <-chan struct{} // the lease's death, with a dynamic assignment
	if pt.lease != nil {
		dead = pt.lease.alive.Done()
	}
	pt.mapTimer = time.NewTimer(time.Hour)
	pt.mapTimer.Stop()
	defer pt.mapTimer.Stop()
	for {
		select {
		case <-pt.in.Advanced():
		case <-pt.poke:
		case <-pt.mapTimer.C:
		case <-dead:
			dead = nil
			pt.c.lose(pt, "its lease passed")
		case <-pt.stopAck:
			return
		}
		if pt.c.life.Forced() || pt.lost.Load() || !pt.valid() {
			continue // a force, or a lease passed, acknowledges nothing more
		}
		pos, ok := pt.in.Prefix()
		pt.writeFinished(pos, ok, false)
		if !ok {
			continue
		}
		if m := pt.held.popTo(pos); m != nil {
			if err := m.Ack(); err != nil {
				pt.c.cfg.logger.Warn("jetstream: acknowledgement not sent", slog.String("consumer", pt.c.name),
					slog.Int("partition", int(pt.p)), slog.Int64("position", pos), slog.Any("error", err))
			}
			pt.c.acks.Add(1)
			pt.lastAcked, pt.lastAckedPos = m, pos
		}
	}
}

// release lets the partition go: its fetching stops, the partition is
// revoked under ctx (or lost, after ForceStop), its goroutines are joined,
// and, unless forced, the settled prefix is acknowledged and the server's
// confirmation awaited.
//
// With a dynamic assignment the drain ends early if the lease dies
// meanwhile (nothing is acknowledged then), the lease is renewed until the
// end, and then deleted on its revision, unless forced: a ForceStop
// releases nothing, its leases expire.
func (pt *part[T]) release(ctx context.Context) (partition.Settled, error) {
	c := pt.c
	pt.cancelStop()
	if pt.lease != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(pt.lease.alive, cancel)()
	}
	var s partition.Settled
	var err error
	if c.life.Forced() || pt.lost.Load() {
		s, err = c.disp.Lose(pt.p)
	} else {
		s, err = c.disp.Revoke(ctx, pt.p)
	}
	close(pt.stopAck)
	<-pt.fetchDone
	c.mu.Lock()
	c.received[pt.p] = max(c.received[pt.p], pt.seen, pt.last)
	c.mu.Unlock()
	<-pt.ackDone
	if err != nil {
		err = fmt.Errorf("jetstream: consumer %q: %w", c.name, err)
	}
	if !c.life.Forced() && !pt.lost.Load() && pt.valid() {
		pt.writeFinished(s.Prefix, s.OK, true) // what a forced rest leaves above the prefix
	}
	if !c.life.Forced() && !pt.lost.Load() && s.OK && pt.valid() {
		err = errors.Join(err, pt.confirm(s.Prefix))
	}
	if pt.lease != nil && !c.life.Forced() && !pt.reopening {
		c.dropLease(pt.lease)
	}
	return s, err
}

// confirm acknowledges position pos and waits for the server's reply: the
// message at pos if it was not acknowledged yet, else the last one
// acknowledged again (the server answers an acknowledgement at or below its
// ack floor too, after every earlier one on the connection).
func (pt *part[T]) confirm(pos int64) error {
	c := pt.c
	ctx, cancel := context.WithTimeout(c.runCtx, c.cfg.timeout)
	defer cancel()
	var err error
	if !pt.valid() {
		return nil // the lease passed while draining: the next owner replays from the ack floor
	}
	if m := pt.held.popTo(pos); m != nil {
		err = m.DoubleAck(ctx)
		c.acks.Add(1)
	} else if pt.lastAcked != nil {
		_, err = c.js.Conn().RequestWithContext(ctx, pt.lastAcked.Reply(), []byte("+ACK"))
	}
	if err != nil {
		return fmt.Errorf("jetstream: consumer %q: partition %d: acknowledging position %d: %w", c.name, pt.p, pos, err)
	}
	return nil
}

// Revoke releases partition p while the consumer runs: it stops fetching,
// drains what was delivered until ctx ends, forces the rest, acknowledges
// the settled prefix and waits for the server's confirmation, and returns
// the settled prefix. Once it returns, no exchange of p runs (unless the
// error wraps partition.ErrNotDrained: a handler ignored its cancelled
// context) and the server's ack floor of p is the prefix, so the next owner
// starts right after it. A partition not owned returns ErrNotOwned; a
// consumer not running, ErrIllegalState.
func (c *Consumer[T]) Revoke(ctx context.Context, p int32) (partition.Settled, error) {
	if err := c.life.Enter("revoke", component.StateRunning); err != nil {
		return partition.Settled{Partition: p}, err
	}
	defer c.life.Release()
	c.mu.Lock()
	pt := c.parts[p]
	if pt == nil {
		c.mu.Unlock()
		return partition.Settled{Partition: p}, fmt.Errorf("%w: consumer %q: partition %d", ErrNotOwned, c.name, p)
	}
	delete(c.parts, p)
	c.mu.Unlock()
	return pt.release(ctx)
}
