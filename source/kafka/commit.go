package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// manage is the committing goroutine: on every wake-up it resumes the
// partitions that have room again and commits the prefixes that moved; a
// failed commit is tried again after a short wait.
func (c *Consumer[T]) manage() {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-c.kick:
		case <-retry.C:
		case <-c.mgrStop:
			return
		}
		c.balance()
		if _, err := c.commit(c.ready()); err != nil {
			c.cfg.logger.Debug("kafka: commit failed, trying again", slog.String("consumer", c.name), slog.Any("error", err))
			retry.Reset(c.cfg.retryCommit)
		}
	}
}

// ready returns the commit due of every owned partition whose prefix moved
// past its last acknowledged commit or whose finished map changed.
func (c *Consumer[T]) ready() map[int32]commitAt {
	c.mu.Lock()
	defer c.mu.Unlock()
	offsets := make(map[int32]commitAt)
	for p, o := range c.owned {
		if at, ok := c.due(o); ok {
			offsets[p] = at
		}
	}
	return offsets
}

// commitAt is a partition's commit: the next offset to read and the
// metadata, an encoded partition.FinishedMap of the records finished at or
// above it ("" when none, and franz-go's default, the member id, is sent).
type commitAt struct {
	offset int64
	meta   string
	moved  bool // the offset moved past the last commit: the hook is told
}

// due returns o's commit when it differs from the last acknowledged one:
// the prefix + 1 (or the last commit, while the prefix has not passed it)
// and the map of what finished above it (c.mu). O(records held above the
// prefix), once per wake-up of the committing goroutine, not per record.
func (c *Consumer[T]) due(o *owned[T]) (commitAt, bool) {
	at := commitAt{offset: max(o.committed, o.from)}
	pos, ok := o.in.Prefix()
	moved := ok && pos+1 > o.committed
	if ok && pos+1 > at.offset {
		at.offset = pos + 1
	}
	if c.cfg.mapLen > 0 {
		m := partition.FinishedMap{Base: at.offset, Spans: o.in.Tracker().FinishedAbove(at.offset, nil)}
		if len(m.Spans) > 0 {
			// Valid spans (FinishedAbove's); a map that does not fit
			// keeps the spans that do, the rest replayed after a crash.
			at.meta, _, _ = m.Encode(c.cfg.mapLen)
		}
	}
	at.moved = moved
	return at, moved || at.meta != o.meta
}

// commit commits offsets synchronously, after any commit in progress has
// been answered, and counts an offset as committed only from the broker's
// answer. It gives up when the consumer is forced or the commit timeout
// passes. It returns nil when every offset was acknowledged; else refused
// holds each partition's reason (the request's error for all when the
// request failed), and the error wraps ErrCommit and the first reason.
func (c *Consumer[T]) commit(offsets map[int32]commitAt) (refused map[int32]error, _ error) {
	if len(offsets) == 0 {
		return nil, nil
	}
	refuseAll := func(err error) (map[int32]error, error) {
		refused := make(map[int32]error, len(offsets))
		for p := range offsets {
			refused[p] = err
		}
		return refused, errorf(ErrCommit, "consumer %q: %w", c.name, err)
	}
	select {
	case c.commitSem <- struct{}{}:
	case <-c.base.Done():
		return refuseAll(context.Cause(c.base))
	}
	defer func() { <-c.commitSem }()
	ctx, cancel := context.WithTimeout(c.base, c.cfg.commitTimeout)
	defer cancel()
	req := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, at := range offsets {
		req[p] = kgo.EpochOffset{Epoch: -1, Offset: at.offset}
	}
	// The maps go in the request franz-go makes, which keeps its fencing
	// (the group's generation and member id): a zombie's map is refused
	// with its offset.
	ctx = kgo.PreCommitFnContext(ctx, func(r *kmsg.OffsetCommitRequest) error {
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				rp := &r.Topics[i].Partitions[j]
				if at := offsets[rp.Partition]; at.meta != "" {
					rp.Metadata = &at.meta
				}
			}
		}
		return nil
	})
	acked := make(map[int32]commitAt, len(offsets))
	refused = make(map[int32]error)
	var failed error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.sub.Topic: req},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			// The request has the one topic, so every answer is of it
			// (from OffsetCommit v10 on, it is named by id only).
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					at, ok := offsets[p.Partition]
					if !ok {
						continue
					}
					if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
						refused[p.Partition] = fmt.Errorf("partition %d: %w", p.Partition, perr)
						if moved(perr) {
							c.stale(p.Partition, at.offset, perr)
						}
						continue
					}
					acked[p.Partition] = at
				}
			}
		})
	c.acknowledged(acked)
	if failed == nil {
		for p := range offsets {
			if _, ok := acked[p]; !ok && refused[p] == nil {
				refused[p] = fmt.Errorf("partition %d: %w", p, errNoAnswer)
			}
		}
	}
	if failed == nil && len(refused) == 0 {
		return nil, nil
	}
	c.stats.commitFailures.Add(1)
	if failed != nil {
		return refuseAll(failed)
	}
	return refused, errorf(ErrCommit, "consumer %q: %w", c.name, firstOf(refused))
}

// errNoAnswer is the reason of a partition the broker's answer left out.
var errNoAnswer = errors.New("kafka: no answer for the partition")

// firstOf returns the reason of the lowest partition in refused.
func firstOf(refused map[int32]error) error {
	return refused[slices.Min(slices.Collect(maps.Keys(refused)))]
}

// moved reports whether err is the group's answer that this member's
// generation is over or being replaced: a rebalance took (or is taking) the
// partition, whose next owner may have committed already, so its final
// commit is legitimately refused and must not be pressed.
func moved(err error) bool {
	for _, e := range []error{kerr.RebalanceInProgress, kerr.IllegalGeneration, kerr.UnknownMemberID,
		kerr.FencedInstanceID, kerr.FencedMemberEpoch, kerr.StaleMemberEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// stale counts and logs a commit the group refused as a zombie's.
func (c *Consumer[T]) stale(p int32, off int64, why error) {
	c.stats.staleCommits.Add(1)
	member, gen := c.cl.GroupMetadata()
	c.cfg.logger.Warn("kafka: commit refused: this member's generation is over", slog.String("consumer", c.name),
		slog.Int("partition", int(p)), slog.Int64("offset", off), slog.String("member", member),
		slog.Int("generation", int(gen)), slog.Any("reason", why))
}

// acknowledged records what the broker acknowledged and tells the hook of
// the offsets that moved (a commit of a changed map only does not).
func (c *Consumer[T]) acknowledged(acked map[int32]commitAt) {
	c.mu.Lock()
	for p, at := range acked {
		if o := c.owned[p]; o != nil && at.offset >= o.committed {
			o.committed, o.meta = at.offset, at.meta
		}
	}
	c.mu.Unlock()
	c.stats.commits.Add(int64(len(acked)))
	if c.cfg.onCommit == nil {
		return
	}
	for p, at := range acked {
		if at.moved {
			c.callCommitHook(p, at.offset)
		}
	}
}

// callCommitHook calls the hook on a goroutine of its own, waited for: the
// committing goroutine and the shutdown's (the final commit) go on even when
// the hook ends its goroutine with runtime.Goexit, which is logged as its
// panic is. One goroutine per partition committed, not per record.
func (c *Consumer[T]) callCommitHook(p int32, off int64) {
	pe, exited := component.Aside(func() { c.cfg.onCommit(p, off) })
	if exited {
		pe = component.NewPanicError(schedulers.ErrGoexit)
	}
	if pe != nil {
		c.cfg.logger.Error("kafka: commit hook panicked", slog.String("consumer", c.name), slog.Any("error", pe))
	}
}

// errorf wraps sentinel with a message prefixed by the package name.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
