package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/aggflow/aggflow/dispatch"
)

// assign is the goroutine of a dynamic assignment: every quarter of the TTL
// it renews the leases held and the member key, then, until a stop begins,
// balances (releases what is above the fair share, claims free partitions
// below it). Renewals go on while the stop drains, until supervise is done.
func (c *Consumer[T]) assign() {
	defer close(c.assignDone)
	tick := time.NewTicker(c.cfg.ttl / 4)
	defer tick.Stop()
	quit := c.quit
	for {
		c.renewAll()
		if quit != nil {
			c.rebalance()
		}
		select {
		case <-tick.C:
		case <-quit:
			quit = nil
			close(c.balanceStopped)
		case <-c.stopRenew:
			return
		}
	}
}

// renewAll renews every lease held and the member key, one request each.
// A lease whose deadline passed dies here at the latest.
func (c *Consumer[T]) renewAll() {
	c.renewed = mono()
	c.mu.Lock()
	ls := slices.Collect(maps.Values(c.leased))
	c.mu.Unlock()
	for _, l := range ls {
		c.lz.renew(c.runCtx, l)
	}
	if err := c.lz.join(c.runCtx); err != nil && c.runCtx.Err() == nil {
		c.cfg.logger.Warn("jetstream: member key not renewed", slog.String("consumer", c.name), slog.Any("error", err))
	}
}

// rebalance takes one step towards the fair share, from one listing of the
// bucket: the partitions above it are handed off (in the background), free
// ones are claimed and opened (here, one after the other).
func (c *Consumer[T]) rebalance() {
	members, held, err := c.lz.view(c.runCtx)
	if err != nil {
		if c.runCtx.Err() == nil {
			c.cfg.logger.Warn("jetstream: lease bucket not listed", slog.String("consumer", c.name), slog.Any("error", err))
		}
		return
	}
	c.mu.Lock()
	owned := slices.Sorted(maps.Keys(c.parts))
	var free []int32
	for p := range int32(c.topo.Partitions) {
		if !held[p] && c.leased[p] == nil {
			free = append(free, p)
		}
	}
	c.mu.Unlock()
	release, claim := plan(c.topo.Partitions, members, owned, free)
	for _, p := range release {
		c.handOff(p)
	}
	for _, p := range claim {
		select {
		case <-c.quit:
			return
		default:
		}
		if mono()-c.renewed >= int64(c.cfg.ttl/4) {
			c.renewAll() // claims take requests each: the leases held must not wait for the end of the round
		}
		if err := c.claim(p); err != nil {
			c.fail(err)
			return
		}
	}
}

// claim claims partition p and, if it got the lease, opens it: unpins its
// durable consumer (the old owner's next pull is refused), takes a fresh
// handle of it (no pin id), resets it to its ack floor + 1 and starts
// fetching. A lease held by another member is no error; a failure to open
// is, after the lease was released.
func (c *Consumer[T]) claim(p int32) error {
	l, err := c.lz.claim(c.runCtx, p)
	if err != nil || l == nil {
		if err != nil && c.runCtx.Err() == nil {
			c.cfg.logger.Warn("jetstream: partition not claimed", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		}
		return nil // tried again on the next round
	}
	c.mu.Lock()
	c.leased[p] = l
	c.mu.Unlock()
	pt, err := c.openClaimed(p, l)
	if err != nil {
		c.dropLease(l)
		if errors.Is(err, errLeasePassed) {
			c.cfg.logger.Warn("jetstream: partition not opened: its lease passed while claiming", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Uint64("epoch", l.epoch))
			return nil // tried again on the next round
		}
		return err
	}
	c.mu.Lock()
	c.parts[p] = pt
	c.opened = append(c.opened, pt)
	c.mu.Unlock()
	pt.run()
	c.cfg.logger.Debug("jetstream: partition claimed", slog.String("consumer", c.name), slog.Int("partition", int(p)),
		slog.Uint64("epoch", l.epoch), slog.Int64("from", pt.from))
	return nil
}

// openClaimed unpins partition p's durable consumer and opens it under l.
func (c *Consumer[T]) openClaimed(p int32, l *lease) (*part[T], error) {
	ctx, cancel := context.WithTimeout(c.runCtx, c.cfg.timeout)
	defer cancel()
	if !l.valid() {
		return nil, errLeasePassed
	}
	if err := c.stream.UnpinConsumer(ctx, c.durable(p), pinGroup); err != nil {
		return nil, c.serverError("unpin of durable consumer "+c.durable(p), err)
	}
	cons, err := c.stream.Consumer(ctx, c.durable(p))
	if err != nil {
		return nil, c.serverError("durable consumer "+c.durable(p), err)
	}
	return c.open(p, cons, l)
}

// handOff releases partition p gracefully, in the background: revoked
// (drained for at most the request timeout), its prefix acknowledged and
// confirmed, then its lease deleted, so that the member that claims it next
// starts right after the prefix.
func (c *Consumer[T]) handOff(p int32) {
	if c.life.Enter("handoff", dispatch.StateRunning) != nil {
		return // a stop began: supervise releases p
	}
	c.mu.Lock()
	pt := c.parts[p]
	if pt == nil {
		c.mu.Unlock()
		c.life.Release()
		return
	}
	delete(c.parts, p)
	c.mu.Unlock()
	go func() {
		defer c.life.Release()
		ctx, cancel := context.WithTimeout(c.drainCtx, c.cfg.timeout)
		defer cancel()
		if _, err := pt.release(ctx); err != nil {
			c.cfg.logger.Warn("jetstream: partition handed off with an error", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		}
	}()
}

// lose releases pt as lost, in the background: nothing more of it is
// acknowledged. Its lease is dead first, so its gate and acknowledgements
// stop at once. If a stop or a revocation took pt already, that one
// releases it, as lost.
func (c *Consumer[T]) lose(pt *part[T], why string) {
	if c.cfg.noFence {
		return // the control: the stalled owner goes on
	}
	pt.lost.Store(true)
	pt.lease.kill()
	if c.life.Enter("loss", dispatch.StateRunning) != nil {
		return // a stop began: supervise releases pt, as lost
	}
	c.mu.Lock()
	if c.parts[pt.p] != pt {
		c.mu.Unlock()
		c.life.Release()
		return
	}
	delete(c.parts, pt.p)
	c.mu.Unlock()
	c.cfg.logger.Warn("jetstream: partition lost", slog.String("consumer", c.name), slog.Int("partition", int(pt.p)),
		slog.Uint64("epoch", pt.lease.epoch), slog.String("reason", why))
	go func() {
		defer c.life.Release()
		_, _ = pt.release(c.drainCtx) // what a loss leaves is the next owner's
	}()
}

// dropLease deletes l on its revision (a lease not ours any more is left)
// and stops renewing it.
func (c *Consumer[T]) dropLease(l *lease) {
	if err := c.lz.release(c.runCtx, l); err != nil && c.runCtx.Err() == nil {
		c.cfg.logger.Warn("jetstream: lease not released", slog.String("consumer", c.name), slog.Any("error", err))
	}
	l.kill()
	c.mu.Lock()
	if c.leased[l.p] == l {
		delete(c.leased, l.p)
	}
	c.mu.Unlock()
}
