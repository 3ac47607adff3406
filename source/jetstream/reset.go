package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
)

// reset re-opens partition pt from its durable consumer's ack floor, the
// one way back from a break in its continuity: a delivery it missed, a
// redelivery behind its last position, a failed pull or a lost connection.
// Called from pt's fetching goroutine, which then returns. pt's tracker is
// broken first, so nothing above the last position tracked is acknowledged;
// then, in the background (reopen), pt is released as a revocation is
// (drained for at most the request timeout, then forced; its settled prefix
// acknowledged and confirmed), the connection awaited, the durable
// consumer reset to its ack floor + 1 and the partition assigned again
// from there, under the same lease if any. If a stop, a revocation, a
// handoff or a loss took pt first, that one releases it.
func (c *Consumer[T]) reset(pt *part[T], why string, attrs ...any) {
	pt.in.Tracker().Break()
	c.resets.Add(1)
	c.cfg.logger.Warn("jetstream: partition reset", append([]any{slog.String("consumer", c.name), slog.Int("partition", int(pt.p)),
		slog.String("reason", why)}, attrs...)...)
	if c.life.Enter("reset", component.StateRunning) != nil {
		return // a stop began: supervise releases pt
	}
	c.mu.Lock()
	if c.parts[pt.p] != pt {
		c.mu.Unlock()
		c.life.Release()
		return
	}
	delete(c.parts, pt.p)
	c.mu.Unlock()
	pt.reopening = true
	deadline := time.Now().Add(c.cfg.serverWait)
	c.goHeld(fmt.Sprintf("partition %d: reset", pt.p), func() { c.reopen(pt, deadline) })
}

// reopen is reset's background part: it releases old and opens its
// partition again, retrying while the server is away, until deadline (the
// server loss timeout after the reset began), after which the consumer
// fails with ErrUnreachable.
func (c *Consumer[T]) reopen(old *part[T], deadline time.Time) {
	p, l := old.p, old.lease
	ctx, cancel := context.WithTimeout(c.drainCtx, c.cfg.timeout)
	s, err := old.release(ctx)
	cancel()
	if err != nil {
		c.cfg.logger.Warn("jetstream: partition reset: settled prefix not confirmed", slog.String("consumer", c.name),
			slog.Int("partition", int(p)), slog.Any("error", err))
	}
	if c.life.Forced() {
		return // a ForceStop: nothing more is opened
	}
	var pt *part[T]
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if err = c.connected(deadline); err == nil {
			if l != nil {
				pt, err = c.openClaimed(p, l)
			} else {
				pt, err = c.open(p, old.cons, nil)
			}
			if err == nil {
				break
			}
		}
		lost := false
		switch {
		case c.stopping():
		case l != nil && (errors.Is(err, errLeasePassed) || !l.valid()):
			lost = true
			c.cfg.logger.Warn("jetstream: partition lost", slog.String("consumer", c.name), slog.Int("partition", int(p)),
				slog.Uint64("epoch", l.epoch), slog.String("reason", "its lease passed while it was reset"))
		case errors.Is(err, ErrStreamNotFound), errors.Is(err, natsjs.ErrConsumerNotFound), errors.Is(err, nats.ErrConnectionClosed),
			!time.Now().Add(wait).Before(deadline):
			c.fail(fmt.Errorf("%w: consumer %q: partition %d: not reopened within %v of its reset: %v",
				ErrUnreachable, c.name, p, c.cfg.serverWait, err))
		default:
			select {
			case <-time.After(wait): // the server is back and not ready yet: try again
				continue
			case <-c.quit:
			}
		}
		if l != nil && !c.life.Forced() {
			c.dropLease(l)
		}
		if lost {
			c.reclaim(p, "its lease passed while it was reset", l.epoch)
		}
		return
	}
	c.mu.Lock()
	quit := c.stopping()
	if !quit {
		c.parts[p] = pt
		c.opened = append(c.opened, pt)
	}
	// old's counters are final: kept as a sum, so that a partition reset
	// often does not keep every part it was.
	if i := slices.Index(c.opened, old); i >= 0 {
		c.opened = slices.Delete(c.opened, i, i+1)
		x := old.in.Stats()
		c.resetStats.Received += x.Received
		c.resetStats.Succeeded += x.Succeeded
		c.resetStats.Failed += x.Failed
		c.resetStats.Discarded += x.Discarded
		c.resetStats.InFlight += x.InFlight
	}
	c.mu.Unlock()
	if quit {
		// supervise released what it found: pt never ran, nothing of it
		// to acknowledge.
		pt.cancelStop()
		_, _ = c.disp.Lose(p)
		if l != nil && !c.life.Forced() {
			c.dropLease(l)
		}
		return
	}
	pt.run()
	c.cfg.logger.Info("jetstream: partition reopened", slog.String("consumer", c.name), slog.Int("partition", int(p)),
		slog.Int64("from", pt.from), slog.Int64("acknowledged", s.Prefix), slog.Bool("settled", s.OK))
}

// stopping reports whether a stop began.
func (c *Consumer[T]) stopping() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// connected waits until the connection is up, deadline passes (an error
// wrapping nats.ErrDisconnected), the connection closes for good
// (nats.ErrConnectionClosed) or a stop begins.
func (c *Consumer[T]) connected(deadline time.Time) error {
	nc := c.js.Conn()
	changed := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(changed)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return nats.ErrConnectionClosed
		}
		select {
		case <-changed:
		case <-timer.C:
			return nats.ErrDisconnected
		case <-c.quit:
			return dispatch.ErrStopped
		}
	}
	return nil
}
