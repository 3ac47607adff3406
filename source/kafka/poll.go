package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
)

// poll delivers every polled record to its partition's intake, in offset
// order, until ctx ends (nil) or a record cannot be delivered (its error).
// It goes on while the revoke callback drains the revoked partitions: the
// partitions a batch's records go to are those owned when the poll
// returned (see pollOnce), and a partition released meanwhile takes none.
func (c *Consumer[T]) poll(ctx context.Context) error {
	for {
		fs, to := c.pollOnce(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		err := c.deliverAll(ctx, fs, to)
		c.renew()
		c.balance()
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
}

// pollOnce polls a batch and returns it with the owners of its partitions
// then. Both under pollMu: an assignment waits for it (see barrier), so a
// batch fetched under a partition's previous assignment never goes to the
// next one.
func (c *Consumer[T]) pollOnce(ctx context.Context) (kgo.Fetches, map[int32]*owned[T]) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	// A lapsed lease or an assignment ends the poll: the partition is
	// renewed, or assigned, without waiting for records.
	pctx, wake := context.WithCancel(ctx)
	defer wake()
	c.mu.Lock()
	c.wakePoll = wake
	if len(c.lapses) > 0 || c.assigning > 0 {
		wake()
	}
	c.mu.Unlock()
	fs := c.cl.PollRecords(pctx, c.cfg.maxPoll)
	c.mu.Lock()
	defer c.mu.Unlock()
	to := make(map[int32]*owned[T])
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if o := c.owned[fp.Partition]; o != nil && len(fp.Records) > 0 {
			to[fp.Partition] = o
		}
	})
	return fs, to
}

// barrier waits for the poll in progress to return and take its owners
// (pollOnce), ending it first: called before partitions are assigned, so
// that no batch polled before goes to them. The rebalance callbacks
// invalidated the records buffered for the partitions they revoked.
func (c *Consumer[T]) barrier() {
	c.mu.Lock()
	c.assigning++
	wake := c.wakePoll
	c.mu.Unlock()
	if wake != nil {
		wake()
	}
	c.pollMu.Lock()
	//lint:ignore SA2001 the lock is a barrier: it waits for the poll in progress, which took its owners, and holds nothing
	c.pollMu.Unlock()
	c.mu.Lock()
	c.assigning--
	c.mu.Unlock()
}

// deliverAll delivers fs's records to the partitions' owners to, in
// offset order; a partition released meanwhile takes no more of them.
func (c *Consumer[T]) deliverAll(ctx context.Context, fs kgo.Fetches, to map[int32]*owned[T]) error {
	var refusedErr error
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) {
			return // the poll was ended for a lapsed lease
		}
		if setting, ok := c.refusal(err); ok {
			if refusedErr == nil {
				refusedErr = errorf(ErrRefused, "consumer %q: %s: %w", c.name, setting, err)
			}
			return
		}
		// The client retries what can be retried; what reaches here is
		// reported and the partition goes on from where it was.
		c.cfg.logger.WarnContext(ctx, "kafka: fetch error", slog.String("consumer", c.name),
			slog.String("topic", topic), slog.Int("partition", int(p)), slog.Any("error", err))
	})
	if refusedErr != nil {
		return refusedErr
	}
	for _, f := range fs {
		for _, t := range f.Topics {
			for _, fp := range t.Partitions {
				c.watermark(fp.Partition, fp.HighWatermark)
				if len(fp.Records) == 0 {
					continue
				}
				o := to[fp.Partition]
				if o == nil {
					// Not owned (any more): its owner reads these records
					// from its last commit, so they are neither handled nor
					// committed here. An assignment that failed stopped the
					// consumer already.
					c.cfg.logger.DebugContext(ctx, "kafka: records of a partition not owned, left to its owner",
						slog.String("consumer", c.name), slog.Int("partition", int(fp.Partition)), slog.Int("records", len(fp.Records)))
					continue
				}
				for _, r := range fp.Records {
					if o.gone.Load() {
						break // released: its next owner reads the rest
					}
					if err := c.deliver(ctx, o, r); err != nil {
						if o.gone.Load() && errors.Is(err, dispatch.ErrStopped) {
							break // revoked while delivering: not admitted
						}
						return err
					}
				}
			}
		}
	}
	return nil
}

// deliver decodes r and hands it to its partition's intake; a bad record
// goes to the bad-record hook.
func (c *Consumer[T]) deliver(ctx context.Context, o *owned[T], r *kgo.Record) error {
	if o.skip.Contains(r.Offset) {
		return c.skip(o, r)
	}
	if len(r.Key) == 0 {
		return c.bad(ctx, o, r, fmt.Errorf("%w: partition %d offset %d", ErrNoKey, r.Partition, r.Offset))
	}
	x, err := c.decode(r)
	if err != nil {
		return c.bad(ctx, o, r, fmt.Errorf("%w: partition %d offset %d: %w", ErrDecode, r.Partition, r.Offset, err))
	}
	attempt := 1
	if r.Offset <= o.high.Load() {
		attempt = 2 // read again after a rebalance gave the partition back
	} else {
		o.high.Store(r.Offset)
	}
	c.keep(o, r)
	if err := o.in.DeliverSize(ctx, x, r.Offset, attempt, len(r.Key)+len(r.Value)); err != nil {
		return fmt.Errorf("kafka: consumer %q: %w", c.name, err)
	}
	c.stats.delivered.Add(1)
	return nil
}

// skip tracks r as finished without delivering it: a previous owner
// finished it (the commit's map). Its aggregate's records before it were
// finished too (see partition.FinishedMap), so none of them is replayed
// after it.
func (c *Consumer[T]) skip(o *owned[T], r *kgo.Record) error {
	o.high.Store(max(o.high.Load(), r.Offset))
	tr := o.in.Tracker()
	if err := tr.Track(r.Offset); err != nil {
		return fmt.Errorf("kafka: consumer %q: %w", c.name, err)
	}
	_ = tr.Finish(r.Offset) // tracked just above: it cannot fail
	c.stats.skipped.Add(1)
	c.nudge()
	return nil
}

// decode calls the decoder, recovering a panic into *PanicError.
func (c *Consumer[T]) decode(r *kgo.Record) (x T, err error) {
	defer component.Catch(&err)
	return c.codec.Decode(r.Key, r.Value)
}

// bad asks the hook about r; a discarded record's position ends at once,
// so the prefix, and the next commit, pass it.
func (c *Consumer[T]) bad(ctx context.Context, o *owned[T], r *kgo.Record, reason error) error {
	if err := c.callBad(ctx, r, reason); err != nil {
		return fmt.Errorf("%w: consumer %q: %w: %w", ErrBadRecord, c.name, reason, err)
	}
	tr := o.in.Tracker()
	if err := tr.Track(r.Offset); err != nil {
		return fmt.Errorf("kafka: consumer %q: %w", c.name, err)
	}
	_ = tr.Finish(r.Offset) // tracked just above: it cannot fail
	c.stats.discarded.Add(1)
	c.nudge()
	return nil
}

func (c *Consumer[T]) callBad(ctx context.Context, r *kgo.Record, reason error) (err error) {
	defer component.Catch(&err)
	return c.cfg.onBad(ctx, r, reason)
}

// logBadRecord is the default bad-record hook: log and discard.
func logBadRecord(l *slog.Logger, name string) BadRecordHook {
	return func(ctx context.Context, r *kgo.Record, reason error) error {
		l.WarnContext(ctx, "kafka: bad record discarded", slog.String("consumer", name), slog.String("topic", r.Topic),
			slog.Int("partition", int(r.Partition)), slog.Int64("offset", r.Offset), slog.Any("reason", reason))
		return nil
	}
}

// refusal reports whether err, from a poll, is the broker refusing a
// setting for good, and names the setting. franz-go retries its group
// session after any error, so a refused JoinGroup or an authorization
// failure would leave the member idle for ever: only these codes stop the
// consumer; the others, transient or the group's rebalancing (moved), are
// retried by the client.
func (c *Consumer[T]) refusal(err error) (setting string, ok bool) {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return "", false
	}
	switch ke {
	case kerr.InvalidSessionTimeout:
		return fmt.Sprintf("session timeout %v", c.cl.OptValue(kgo.SessionTimeout)), true
	case kerr.InconsistentGroupProtocol:
		return fmt.Sprintf("balancers of group %q (the other members use none of them)", c.sub.Group), true
	case kerr.InvalidGroupID:
		return fmt.Sprintf("group %q", c.sub.Group), true
	case kerr.GroupAuthorizationFailed:
		return fmt.Sprintf("group %q (not authorized)", c.sub.Group), true
	case kerr.TopicAuthorizationFailed:
		return fmt.Sprintf("topic %q (not authorized)", c.sub.Topic), true
	case kerr.GroupMaxSizeReached:
		return fmt.Sprintf("group %q (group.max.size reached)", c.sub.Group), true
	case kerr.UnsupportedVersion:
		return "the client's protocol versions", true
	}
	return "", false
}
