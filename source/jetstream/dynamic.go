package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aggflow/aggflow/component"
)

// assign is the goroutine of the leases: every quarter of the TTL it renews
// the leases held (and, with a dynamic assignment, the member key), then,
// until a stop begins, balances (releases what is above the fair share,
// claims free partitions below it), or, with a static assignment, claims
// the owned partitions not held yet. Renewals go on while the stop drains,
// until supervise is done.
func (c *Consumer[T]) assign() {
	defer close(c.assignDone)
	tick := time.NewTicker(c.cfg.ttl / 4)
	defer tick.Stop()
	quit := c.quit
	defer func() {
		if quit != nil { // ended by a panic or runtime.Goexit: no claim to come
			close(c.balanceStopped)
		}
	}()
	for {
		c.renewAll()
		switch {
		case quit == nil:
		case c.cfg.dynamic():
			c.rebalance()
		default:
			c.claimWanted()
		}
		select {
		case <-tick.C:
		case <-c.kick:
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
	if !c.cfg.dynamic() {
		return // a static assignment has no member key
	}
	if err := c.lz.join(c.runCtx); err != nil && c.runCtx.Err() == nil {
		c.cfg.logger.Warn("jetstream: member key not renewed", slog.String("consumer", c.name), slog.Any("error", err))
	}
}

// renewDue renews the leases held if a quarter of the TTL passed since the
// last renewals began: claims take requests each, and the leases held must
// not wait for the end of a round.
func (c *Consumer[T]) renewDue() {
	if mono()-c.renewed >= int64(c.cfg.ttl/4) {
		c.renewAll()
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
		c.renewDue()
		if err := c.claim(p); err != nil {
			c.fail(err)
			return
		}
	}
}

// claim claims partition p and, if it got the lease, opens it (openLease).
// A lease held by another member, or a claim that failed, is no error (it is
// tried again on the next round); a failure to open is.
func (c *Consumer[T]) claim(p int32) error {
	l, err := c.lz.claim(c.runCtx, p)
	if err != nil || l == nil {
		if err != nil && c.runCtx.Err() == nil {
			c.cfg.logger.Warn("jetstream: partition not claimed", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		}
		return nil
	}
	_, err = c.openLease(p, l)
	return err
}

// openLease opens partition p under l, just claimed: unpins its durable
// consumer (the old owner's next pull is refused), takes a fresh handle of
// it (no pin id), resets it to its ack floor + 1 and starts fetching. False
// with no error if the lease passed meanwhile, or if the server did not
// answer and the server loss timeout has not passed since the first such
// failure (the partition is claimed again later); an error after the lease
// was released.
func (c *Consumer[T]) openLease(p int32, l *lease) (bool, error) {
	c.mu.Lock()
	c.leased[p] = l
	c.mu.Unlock()
	pt, err := c.openClaimed(p, l)
	if err != nil {
		c.dropLease(l)
		switch {
		case errors.Is(err, errLeasePassed):
			c.cfg.logger.Warn("jetstream: partition not opened: its lease passed while claiming", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Uint64("epoch", l.epoch))
			return false, nil
		case errors.Is(err, ErrUnreachable) && c.openAgain(p):
			c.cfg.logger.Warn("jetstream: partition not opened: the server did not answer in time; claimed again on a later round",
				slog.String("consumer", c.name), slog.Int("partition", int(p)), slog.Uint64("epoch", l.epoch), slog.Any("error", err))
			return false, nil
		}
		return false, err
	}
	c.mu.Lock()
	delete(c.openFailed, p)
	c.parts[p] = pt
	c.opened = append(c.opened, pt)
	c.mu.Unlock()
	pt.run()
	c.cfg.logger.Debug("jetstream: partition claimed", slog.String("consumer", c.name), slog.Int("partition", int(p)),
		slog.Uint64("epoch", l.epoch), slog.Int64("from", pt.from))
	return true, nil
}

// openAgain reports whether partition p, whose open found no answer, is
// still within the server loss timeout of its first such failure: a slow
// server (a loaded machine, one coming back) is waited for as a reset
// waits for it; after that the consumer fails with ErrUnreachable.
func (c *Consumer[T]) openAgain(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first, ok := c.openFailed[p]
	if !ok {
		first = time.Now()
		c.openFailed[p] = first
	}
	return time.Since(first) < c.cfg.serverWait
}

// claimWait is a partition of a static assignment not held: until is the
// monotonic time until which another member's lease on it is waited for;
// lost, why this member lost it, if it did (then until is now: the member
// that holds it claimed it since), and the epoch it lost; ownLease, that a
// lease of this member's own name was waited for once since.
type claimWait struct {
	until    int64
	lost     string
	epoch    uint64
	ownLease bool
}

// claimOwned claims the partitions of a static assignment, on Start: every
// lease first (one request each, so that a process started next finds them
// all held), then each partition claimed is opened; one that another member
// holds is left to the assigning goroutine (claimWanted), which waits for it
// up to the wait.
func (c *Consumer[T]) claimOwned() error {
	until := mono() + int64(c.cfg.wait)
	var claimed []*lease
	for _, p := range c.owned {
		l, err := c.lz.claim(c.runCtx, p)
		if err != nil {
			return c.serverError("lease of partition "+strconv.Itoa(int(p)), err)
		}
		c.mu.Lock()
		if l != nil {
			c.leased[p] = l // renewed while the others are claimed and opened
			claimed = append(claimed, l)
		} else {
			c.wanted[p] = claimWait{until: until}
		}
		c.mu.Unlock()
		if l == nil {
			member, epoch, _ := c.lz.holder(c.runCtx, p)
			c.cfg.logger.Info("jetstream: partition held by another member: waiting for its lease", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.String("holder", member), slog.Uint64("epoch", epoch),
				slog.String("member", c.cfg.member), slog.Duration("wait", c.cfg.wait))
		}
	}
	for _, l := range claimed {
		c.renewDue()
		got, err := c.openLease(l.p, l)
		if err != nil {
			return err
		}
		if !got {
			c.mu.Lock()
			c.wanted[l.p] = claimWait{until: until}
			c.mu.Unlock()
		}
	}
	return nil
}

// claimWanted claims the partitions of a static assignment that it does not
// hold: one another member holds once its wait is over fails the consumer
// with ErrOwned (ErrLeaseLost if this member lost it).
func (c *Consumer[T]) claimWanted() {
	c.mu.Lock()
	ps := slices.Sorted(maps.Keys(c.wanted))
	c.mu.Unlock()
	for _, p := range ps {
		select {
		case <-c.quit:
			return
		default:
		}
		c.renewDue()
		c.mu.Lock()
		w := c.wanted[p]
		c.mu.Unlock()
		l, err := c.lz.claim(c.runCtx, p)
		switch {
		case err != nil && c.runCtx.Err() != nil:
			return
		case err != nil && (mono() < w.until || w.lost != "" && mono() < w.until+int64(c.cfg.serverWait)):
			// Within the wait, or, after a loss (a server restart can take
			// longer than a lease), within the server loss timeout: tried
			// again on the next round.
			c.cfg.logger.Warn("jetstream: partition not claimed", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		case err != nil:
			c.fail(c.serverError("lease of partition "+strconv.Itoa(int(p)), err))
			return
		case l != nil:
			got, err := c.openLease(p, l)
			if err != nil {
				c.fail(err)
				return
			}
			if got {
				c.mu.Lock()
				delete(c.wanted, p)
				c.mu.Unlock()
				if w.lost != "" {
					c.cfg.logger.Warn("jetstream: partition claimed again after its loss", slog.String("consumer", c.name),
						slog.Int("partition", int(p)), slog.Uint64("epoch", l.epoch), slog.String("lost", w.lost))
				}
			}
		case mono() >= w.until:
			if err := c.refuse(p, w); err != nil {
				c.fail(err)
				return
			}
		}
	}
}

// refuse returns the failure of a static assignment whose partition p
// another member still holds after the wait w, or nil if nobody holds it
// any more (it is claimed on the next round) or, after a loss, a lease of
// this member's name does (its own, which its release did not delete: it is
// waited for once more, for twice the TTL). A lease of its name still there
// after that, or after the wait at Start (longer than a crashed
// incarnation's lease lives, by default), is another live process's of the
// same name: refused.
func (c *Consumer[T]) refuse(p int32, w claimWait) error {
	member, epoch, err := c.lz.holder(c.runCtx, p)
	switch {
	case err != nil:
		return nil // freed meanwhile, or not read: tried again on the next round
	case member == c.cfg.member && w.lost != "" && !w.ownLease:
		c.mu.Lock()
		c.wanted[p] = claimWait{until: mono() + int64(2*c.cfg.ttl), lost: w.lost, epoch: w.epoch, ownLease: true}
		c.mu.Unlock()
		return nil
	case w.lost != "":
		return fmt.Errorf("%w: consumer %q: partition %d (member %q, epoch %d): %s; member %q holds it now, epoch %d (%w)",
			ErrLeaseLost, c.name, p, c.cfg.member, w.epoch, w.lost, member, epoch, ErrOwned)
	}
	return fmt.Errorf("%w: consumer %q: partition %d is held by member %q (epoch %d), still after a wait of %v; this member is %q: are two processes given the same partitions?",
		ErrOwned, c.name, p, member, epoch, c.cfg.wait, c.cfg.member)
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
	if c.cfg.wrapPulls != nil {
		cons = c.cfg.wrapPulls(cons)
	}
	return c.open(p, cons, l)
}

// handOff releases partition p gracefully, in the background: revoked
// (drained for at most the request timeout), its prefix acknowledged and
// confirmed, then its lease deleted, so that the member that claims it next
// starts right after the prefix.
func (c *Consumer[T]) handOff(p int32) {
	if c.life.Enter("handoff", component.StateRunning) != nil {
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
	c.goHeld(fmt.Sprintf("partition %d: handoff", p), func() {
		ctx, cancel := context.WithTimeout(c.drainCtx, c.cfg.timeout)
		defer cancel()
		if _, err := pt.release(ctx); err != nil {
			c.cfg.logger.Warn("jetstream: partition handed off with an error", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		}
	})
}

// lose releases pt as lost, in the background: nothing more of it is
// acknowledged. Its lease is dead first, so its gate and acknowledgements
// stop at once. If a stop or a revocation took pt already, that one
// releases it, as lost. A static assignment then claims the partition
// again, at once: if another member holds it, the consumer fails with
// ErrLeaseLost (and during a stop, the stop's error is ErrLeaseLost).
func (c *Consumer[T]) lose(pt *part[T], why string) {
	if c.cfg.noFence {
		return // the control: the stalled owner goes on
	}
	pt.lost.Store(true)
	pt.lease.kill()
	if c.life.Enter("loss", component.StateRunning) != nil {
		if !c.cfg.dynamic() && !c.life.Forced() {
			c.record(fmt.Errorf("%w: consumer %q: partition %d (member %q, epoch %d): %s", ErrLeaseLost, c.name, pt.p,
				c.cfg.member, pt.lease.epoch, why))
		}
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
	c.goHeld(fmt.Sprintf("partition %d: loss", pt.p), func() {
		_, _ = pt.release(c.drainCtx) // what a loss leaves is the next owner's
		c.reclaim(pt.p, why, pt.lease.epoch)
	})
}

// reclaim has the assigning goroutine claim a static partition again after
// its loss, for the reason why under epoch; a dynamic assignment's balance
// claims on its own.
func (c *Consumer[T]) reclaim(p int32, why string, epoch uint64) {
	if c.cfg.dynamic() {
		return
	}
	c.mu.Lock()
	c.wanted[p] = claimWait{until: mono(), lost: why, epoch: epoch}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
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
