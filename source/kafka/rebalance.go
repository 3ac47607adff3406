package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
)

// onAssigned runs once the group assigned partitions and their committed
// offsets are known, before they are fetched: each gets an intake starting
// at its committed offset (0 when the group never committed it).
func (c *Consumer[T]) onAssigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	synced := c.synced.Load()
	metas := c.committedMetadata(ctx)
	c.barrier()
	c.rebal.Lock()
	defer c.rebal.Unlock()
	for p, off := range offsets[c.sub.Topic] {
		c.assign(p, off.EpochOffset().Offset, synced, true, metas[p])
	}
	return offsets, nil
}

// committedMetadata fetches the metadata committed with each partition's
// offset (franz-go hands the offsets only); a failed fetch returns none,
// and the partitions replay from their commits.
func (c *Consumer[T]) committedMetadata(ctx context.Context) map[int32]kadm.OffsetResponse {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.commitTimeout)
	defer cancel()
	resps, err := kadm.NewClient(c.cl).FetchOffsetsForTopics(ctx, c.sub.Group, c.sub.Topic)
	if err != nil {
		c.cfg.logger.Warn("kafka: the committed finished maps could not be read: the assigned partitions replay from their commits",
			slog.String("consumer", c.name), slog.Any("error", err))
		return nil
	}
	metas := make(map[int32]kadm.OffsetResponse)
	for p, r := range resps[c.sub.Topic] {
		metas[p] = r
	}
	return metas
}

// finishedMap returns the map committed at offset committed, or none: no
// metadata, another writer's, a malformed one (logged), or one of another
// offset than the commit franz-go read.
func (c *Consumer[T]) finishedMap(p int32, committed int64, r kadm.OffsetResponse) partition.FinishedMap {
	if r.Err != nil || committed < 0 || r.At != committed {
		return partition.FinishedMap{}
	}
	m, err := partition.DecodeFinishedMap(r.Metadata)
	switch {
	case errors.Is(err, partition.ErrNotFinishedMap):
		return partition.FinishedMap{}
	case err != nil:
		c.cfg.logger.Warn("kafka: committed finished map ignored: the partition replays from its commit", slog.String("consumer", c.name),
			slog.Int("partition", int(p)), slog.Int64("offset", committed), slog.Any("error", err))
		return partition.FinishedMap{}
	case m.Base != committed:
		return partition.FinishedMap{}
	}
	return m
}

// assign makes partition p an intake under a new lease, valid from proofs
// sent at created or later: with synced, created is the send time of the
// SyncGroup that assigned it, a proof; else the lease counts from the
// second (see lease). committed is the offset the group committed last,
// negative when none; meta, what the group holds of its metadata.
func (c *Consumer[T]) assign(p int32, committed, created int64, synced bool, meta kadm.OffsetResponse) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return // leaving the group: the next owner reads it
	}
	member, gen := c.cl.GroupMetadata()
	var l *lease
	if synced {
		l = newLease(p, member, uint64(max(gen, 0)), created, 0, c.lapsed)
		l.prove(created, created+c.leaseFor)
	} else {
		l = newLease(p, member, uint64(max(gen, 0)), created, 1, c.lapsed) // see lease
	}
	in, err := c.disp.Assign(context.WithValue(c.base, leaseCtxKey{}, l), p, max(committed, 0))
	if err != nil {
		c.fail(errorf(ErrAssign, "consumer %q: partition %d: %w", c.name, p, err))
		return
	}
	o := &owned[T]{in: in, lease: l, from: max(committed, 0), committed: max(committed, -1),
		skip: c.finishedMap(p, committed, meta), stop: make(chan struct{}), stopped: make(chan struct{})}
	o.high.Store(-1)
	c.mu.Lock()
	if high, ok := c.high[p]; ok {
		o.high.Store(high)
	}
	if c.closing {
		c.mu.Unlock()
		l.kill()
		_, _ = c.disp.Lose(p) // nothing was delivered to it
		return
	}
	c.owned[p] = o
	c.leases[l] = true
	c.mgr.Add(1)
	c.mu.Unlock()
	c.stats.assigned.Add(1)
	c.goJoined(fmt.Sprintf("partition %d: forwarding", p), func() { c.forward(o) })
}

// forward turns the partition's progress signals into a wake-up of the
// committing goroutine, until the partition is released.
func (c *Consumer[T]) forward(o *owned[T]) {
	defer close(o.stopped)
	for {
		select {
		case <-o.in.Advanced():
			// Wait for the committing goroutine to take the previous
			// wake-up: meanwhile the partition's signals coalesce, so a
			// busy partition costs a wake-up per commit, not per record.
			select {
			case c.kick <- struct{}{}:
			case <-o.stop:
				return
			}
		case <-o.stop:
			return
		}
	}
}

// onRevoked drains the revoked partitions, commits their settled prefixes
// and returns: the group goes on only after that. franz-go stopped
// fetching them and dropped their buffered records before; the poll loop
// goes on with the partitions kept meanwhile.
func (c *Consumer[T]) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	c.release(revoked[c.sub.Topic], true)
}

// onLost forces the lost partitions without committing: another member may
// own them already.
func (c *Consumer[T]) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.release(lost[c.sub.Topic], false)
}

// commitRevoked is the final commit of revoked partitions: offsets is tried
// until the broker acknowledged every one, again with backoff after a
// failure, while ctx (the revoke's deadline) lasts; the first try is made
// even when ctx has ended. A partition the group refuses because it moved
// on (moved) is not tried again: it is logged and counted in
// Stats.Uncommitted. After a force nothing more is tried and nil is
// returned: a force commits nothing. Otherwise the partitions still refused
// at the deadline make an error wrapping ErrCommit and the last reason.
func (c *Consumer[T]) commitRevoked(ctx context.Context, offsets map[int32]commitAt) error {
	left := maps.Clone(offsets)
	tries := 0
	var last error
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = c.cfg.retryCommit, 10*c.cfg.retryCommit
	_, _ = backoff.Retry(ctx, func() (struct{}, error) {
		tries++
		refused, err := c.commit(left)
		for p, at := range left {
			why, bad := refused[p]
			switch {
			case !bad:
				delete(left, p)
			case moved(why):
				delete(left, p)
				delete(refused, p)
				c.stats.uncommitted.Add(1)
				c.cfg.logger.Info("kafka: the group moved on before the final commit of a revoked partition: its next owner reads it again from the last commit",
					slog.String("consumer", c.name), slog.Int("partition", int(p)), slog.Int64("offset", at.offset), slog.Any("reason", why))
			}
		}
		switch {
		case len(left) == 0:
			return struct{}{}, nil
		case c.life.Forced():
			return struct{}{}, backoff.Permanent(err)
		}
		last = errorf(ErrCommit, "consumer %q: %w", c.name, firstOf(refused))
		return struct{}{}, last
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0))
	if len(left) == 0 || c.life.Forced() {
		return nil
	}
	return fmt.Errorf("%w (partitions %v, %d tries within the revoke timeout of %v)", last, slices.Sorted(maps.Keys(left)), tries, c.cfg.revokeTimeout)
}

// release lets partitions ps go. With commit, each drains up to the revoke
// timeout (then its rest is forced) and its settled prefix is committed
// before release returns; without, each is forced and nothing is committed.
// Partitions not owned are skipped.
func (c *Consumer[T]) release(ps []int32, commit bool) {
	c.rebal.Lock()
	os := c.take(ps)
	c.rebal.Unlock()
	c.settle(os, commit)
}

// take removes partitions ps from owned, so that the poll loop delivers
// them nothing more, and returns those owned (c.rebal).
func (c *Consumer[T]) take(ps []int32) map[int32]*owned[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	os := make(map[int32]*owned[T], len(ps))
	for _, p := range ps {
		if o := c.owned[p]; o != nil {
			os[p] = o
			o.gone.Store(true)
			delete(c.owned, p)
		}
	}
	return os
}

// settle is release's end, for the partitions taken: see release.
func (c *Consumer[T]) settle(os map[int32]*owned[T], commit bool) {
	if len(os) == 0 {
		return
	}
	if !commit {
		for _, o := range os {
			o.lease.kill() // another member may own it already: its gate stops at once
		}
	}
	defer func() {
		c.mu.Lock()
		for p, o := range os {
			o.lease.kill()
			delete(c.leases, o.lease)
			// The highest delivered, once the intake shut: a record the
			// poll loop tried meanwhile counts as delivered.
			c.high[p] = o.high.Load()
		}
		c.mu.Unlock()
	}()
	began := time.Now()
	ctx, cancel := context.WithTimeout(c.base, c.cfg.revokeTimeout)
	defer cancel()
	var mu sync.Mutex
	settled := make(map[int32]partition.Settled, len(os))
	ps := slices.Collect(maps.Keys(os))
	errs := component.GoEach(len(ps), func(i int) error {
		p := ps[i]
		var s partition.Settled
		var err error
		if commit {
			// A lease that lapses meanwhile ends the drain: its gate
			// holds the rest, which the force cancels.
			rctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(os[p].lease.alive, cancel)
			s, err = c.disp.Revoke(rctx, p)
			stop()
			cancel()
		} else {
			s, err = c.disp.Lose(p)
		}
		if err != nil {
			c.cfg.logger.Warn("kafka: partition released with handlers still running", slog.String("consumer", c.name),
				slog.Int("partition", int(p)), slog.Any("error", err))
		}
		c.stats.succeeded.Add(s.Stats.Succeeded)
		c.stats.failed.Add(s.Stats.Failed)
		c.stats.dropped.Add(s.Stats.Discarded)
		mu.Lock()
		settled[p] = s
		mu.Unlock()
		return nil
	})
	for i, err := range errs { // a panic of the release: the partition is released, its outcome unknown
		if err != nil {
			c.cfg.logger.Error("kafka: releasing a partition failed", slog.String("consumer", c.name),
				slog.Int("partition", int(ps[i])), slog.Any("error", err))
		}
	}
	for _, o := range os {
		close(o.stop)
		<-o.stopped
	}
	c.unpause(os)
	if !commit {
		c.stats.lost.Add(int64(len(os)))
		return
	}
	c.stats.revoked.Add(int64(len(os)))
	offsets := make(map[int32]commitAt, len(settled))
	c.mu.Lock()
	for p := range settled {
		if at, ok := c.due(os[p]); ok {
			offsets[p] = at
		}
	}
	c.mu.Unlock()
	if err := c.commitRevoked(ctx, offsets); err != nil {
		c.cfg.logger.Error("kafka: the final commit of revoked partitions failed: the consumer stops, their next owner reads them again",
			slog.String("consumer", c.name), slog.Any("error", err))
		c.fail(err)
	}
	c.cfg.logger.Debug("kafka: partitions revoked, drained and committed", slog.String("consumer", c.name),
		slog.Int("partitions", len(os)), slog.Duration("took", time.Since(began)))
}
