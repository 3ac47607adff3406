package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// manage is the committing goroutine: on every wake-up it resumes the
// partitions that have room again and commits the prefixes that moved; a
// failed commit is tried again after a short wait.
func (c *Consumer[T]) manage() {
	defer c.mgr.Done()
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
		if err := c.commit(c.ready()); err != nil {
			c.cfg.logger.Debug("kafka: commit failed, trying again", slog.String("consumer", c.name), slog.Any("error", err))
			retry.Reset(c.cfg.retryCommit)
		}
	}
}

// ready returns the next offset (prefix + 1) of every owned partition whose
// prefix moved past its last acknowledged commit.
func (c *Consumer[T]) ready() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	offsets := make(map[int32]int64)
	for p, o := range c.owned {
		if pos, ok := o.in.Prefix(); ok && pos+1 > o.committed {
			offsets[p] = pos + 1
		}
	}
	return offsets
}

// commit commits offsets synchronously, after any commit in progress has
// been answered, and counts an offset as committed only from the broker's
// answer. It gives up when the consumer is forced or the commit timeout
// passes; the error wraps ErrCommit.
func (c *Consumer[T]) commit(offsets map[int32]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	select {
	case c.commitSem <- struct{}{}:
	case <-c.base.Done():
		return errorf(ErrCommit, "consumer %q: %w", c.name, context.Cause(c.base))
	}
	defer func() { <-c.commitSem }()
	ctx, cancel := context.WithTimeout(c.base, c.cfg.commitTimeout)
	defer cancel()
	req := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, off := range offsets {
		req[p] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	acked := make(map[int32]int64, len(offsets))
	var failed error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.sub.Topic: req},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
						failed = fmt.Errorf("partition %d: %w", p.Partition, perr)
						continue
					}
					if off, ok := offsets[p.Partition]; ok && t.Topic == c.sub.Topic {
						acked[p.Partition] = off
					}
				}
			}
		})
	c.acknowledged(acked)
	if failed != nil {
		c.stats.commitFailures.Add(1)
		return errorf(ErrCommit, "consumer %q: %w", c.name, failed)
	}
	return nil
}

// acknowledged records what the broker acknowledged and tells the hook.
func (c *Consumer[T]) acknowledged(acked map[int32]int64) {
	c.mu.Lock()
	for p, off := range acked {
		if o := c.owned[p]; o != nil && off > o.committed {
			o.committed = off
		}
	}
	c.mu.Unlock()
	c.stats.commits.Add(int64(len(acked)))
	if c.cfg.onCommit == nil {
		return
	}
	for p, off := range acked {
		c.callCommitHook(p, off)
	}
}

func (c *Consumer[T]) callCommitHook(p int32, off int64) {
	defer func() {
		if v := recover(); v != nil {
			c.cfg.logger.Error("kafka: commit hook panicked", slog.String("consumer", c.name), slog.Any("error", recovered(v)))
		}
	}()
	c.cfg.onCommit(p, off)
}

// errorf wraps sentinel with a message prefixed by the package name.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
