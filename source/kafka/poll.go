package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/internal/panics"
)

// poll delivers every polled record to its partition's intake, in offset
// order, until ctx ends (nil) or a record cannot be delivered (its error).
// Rebalances wait for each batch to be delivered (BlockRebalanceOnPoll).
func (c *Consumer[T]) poll(ctx context.Context) error {
	c.initFetches()
	for {
		// A lapsed lease ends the poll (lapsed), so that its partition is
		// renewed while the rebalances wait.
		pctx, wake := context.WithCancel(ctx)
		c.mu.Lock()
		c.wakePoll = wake
		if len(c.lapses) > 0 {
			wake()
		}
		c.mu.Unlock()
		fs := c.cl.PollRecords(pctx, c.cfg.maxPoll)
		wake()
		if ctx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return nil
		}
		err := c.deliverAll(ctx, fs)
		c.sizeFetches()
		c.renew()
		c.balance()
		c.cl.AllowRebalance()
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
}

func (c *Consumer[T]) deliverAll(ctx context.Context, fs kgo.Fetches) error {
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
				o := c.lookup(fp.Partition)
				if o == nil {
					// Not owned (any more): its owner reads these records
					// from its last commit, so they are neither handled nor
					// committed here. An assignment that failed stopped the
					// consumer already.
					c.cfg.logger.WarnContext(ctx, "kafka: records of a partition not owned, left to its owner",
						slog.String("consumer", c.name), slog.Int("partition", int(fp.Partition)), slog.Int("records", len(fp.Records)))
					continue
				}
				for _, r := range fp.Records {
					if err := c.deliver(ctx, o, r); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// fetchSizer sizes the client's fetches to the room of a partition.
// franz-go drops a paused partition's buffered records, fetched again once
// it resumes, so a partition fetch of more records than the partition
// takes before its next pause is read and decoded over and over: 1.4 to 3
// times each record, with small records, under the default budget
// (BenchmarkBindingCost). A partition fetch asks for a sixteenth of the
// partition's share of the budget or of its bound above the prefix,
// whichever is less, in records of the mean size on the wire of the records fetched since the last poll (compressed, as the
// client reads them: 100 bytes until the first fetch), and never more than
// the client's FetchMaxPartitionBytes (1 MB by default), nor less than
// 64 KiB (smaller fetches flooded kfake, whose one loop then answered the
// heartbeats late). The broker still returns a record batch larger than
// the ask, whole.
type fetchSizer struct {
	maxBytes, maxPart, cur int32
	// Counted by the client's fetch goroutines (a kgo hook), taken by the
	// poll loop.
	wire, records atomic.Int64
}

const (
	firstMean    = 100      // bytes per record, before the first fetch
	minFetchPart = 64 << 10 // the smallest partition fetch asked for
)

// OnFetchBatchRead counts a fetched batch (kgo.HookFetchBatchRead).
func (f *fetchSizer) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.wire.Add(int64(m.CompressedBytes))
	f.records.Add(int64(m.NumRecords))
}

// initFetches sizes the first fetches: one partition owned, records of
// firstMean bytes.
func (c *Consumer[T]) initFetches() {
	f := &c.fetches
	f.maxBytes, _ = c.cl.OptValue(kgo.FetchMaxBytes).(int32)
	f.maxPart, _ = c.cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	f.cur = f.maxPart
	c.resize(1, firstMean)
}

// sizeFetches sizes the next fetches from the records fetched since the
// last call. A few atomic operations and a lock, per poll.
func (c *Consumer[T]) sizeFetches() {
	f := &c.fetches
	n, wire := f.records.Swap(0), f.wire.Swap(0)
	c.mu.Lock()
	owned := len(c.owned)
	c.mu.Unlock()
	if n > 0 && owned > 0 {
		c.resize(owned, max(int(wire/n), 1))
	}
}

// resize asks for partition fetches of a sixteenth of a partition's room in
// records of mean bytes, when that is a quarter off the current ask.
func (c *Consumer[T]) resize(owned, mean int) {
	f := &c.fetches
	if f.maxPart <= 0 {
		return
	}
	records := max(min(c.cfg.maxPending/owned, c.cfg.maxHeld)/16, 1)
	want := int64(records) * int64(mean)
	if c.cfg.maxHeldBytes > 0 {
		want = min(want, c.cfg.maxHeldBytes/8)
	}
	part := int32(min(max(want, minFetchPart), int64(f.maxPart)))
	if part < f.cur-f.cur/4 || part > f.cur+f.cur/4 {
		f.cur = part
		c.cl.UpdateFetchMaxBytes(f.maxBytes, part)
	}
}

func (c *Consumer[T]) lookup(p int32) *owned[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned[p]
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
	if r.Offset <= o.high {
		attempt = 2 // read again after a rebalance gave the partition back
	} else {
		o.high = r.Offset
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
	o.high = max(o.high, r.Offset)
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
	defer func() {
		if v := recover(); v != nil {
			err = panics.New(v)
		}
	}()
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
	defer func() {
		if v := recover(); v != nil {
			err = panics.New(v)
		}
	}()
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
