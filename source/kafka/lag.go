package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/aggflow/aggflow/component"
)

// caughtUpEvery is how often CaughtUp looks at the owned partitions'
// prefixes.
const caughtUpEvery = 10 * time.Millisecond

// Lag returns, per owned partition that a fetch reported on already, how
// many records the broker held at that fetch's answer that have not
// finished here: its high watermark less the next offset to commit (the
// finished prefix + 1, or the offset the partition was assigned at). Records
// a failure policy settled count as finished. It sends nothing: a paused
// partition is not fetched, so its end is the one before the pause. Safe for
// concurrent use; O(partitions owned).
func (c *Consumer[T]) Lag() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	lag := make(map[int32]int64, len(c.owned))
	for p, o := range c.owned {
		if o.fetched {
			lag[p] = max(o.end-o.next(), 0)
		}
	}
	return lag
}

// CaughtUp reads the topic's end offsets (the high watermarks, one
// ListOffsets request to each partition leader) and returns nil once every
// partition this member owns has finished every record below its end, the
// records a failure policy settled included: what the broker held at the
// call has been handled. Ownership is looked at as it is then: a partition
// revoked or lost meanwhile is not waited for (its next owner handles what
// is left), one assigned meanwhile is waited for up to the end read at the
// call, and a member that owns no partition waits until it owns one. It
// returns ctx's error wrapped, naming the partitions still behind and by how
// many records; an error wrapping ErrIllegalState when the consumer is not
// running or stops meanwhile; the request's error when the ends cannot be
// read. A topic written in transactions ends with a commit marker, which
// takes an offset and is never delivered: there the marker's partition is
// caught up only once a record after it finished. Cost: the request, then a
// look at the owned partitions' prefixes every 10 ms while it waits. Safe
// for concurrent use.
func (c *Consumer[T]) CaughtUp(ctx context.Context) error {
	if s := c.State(); s != component.StateRunning {
		return errorf(ErrIllegalState, "consumer %q: caught up: not running (%v)", c.name, s)
	}
	listed, err := kadm.NewClient(c.cl).ListEndOffsets(ctx, c.sub.Topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: consumer %q: end offsets of topic %q: %w", c.name, c.sub.Topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	tick := time.NewTicker(caughtUpEvery)
	defer tick.Stop()
	for {
		behind, owns := c.behind(ends)
		if owns && behind == "" {
			return nil
		}
		if s := c.State(); s != component.StateRunning {
			return errorf(ErrIllegalState, "consumer %q: caught up: stopped meanwhile (%v)", c.name, s)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if !owns {
				behind = "owns no partition"
			}
			return fmt.Errorf("kafka: consumer %q: not caught up: %s: %w", c.name, behind, ctx.Err())
		}
	}
}

// behind describes the owned partitions whose next offset is below their
// end in ends ("" when none is), and reports whether any is owned.
func (c *Consumer[T]) behind(ends map[int32]int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.owned))
	for p, o := range c.owned {
		if end, ok := ends[p]; ok && o.next() < end {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		next := c.owned[p].next()
		fmt.Fprintf(&b, "partition %d: %d behind (next offset %d, end %d)", p, ends[p]-next, next, ends[p])
	}
	return b.String(), len(c.owned) > 0
}

// next is the next offset to commit: the finished prefix + 1, or the
// offset the partition was assigned at.
func (o *owned[T]) next() int64 {
	if pos, ok := o.in.Prefix(); ok {
		return pos + 1
	}
	return o.from
}

// watermark records the high watermark a fetch reported for partition p
// (negative: none).
func (c *Consumer[T]) watermark(p int32, hwm int64) {
	if hwm < 0 {
		return
	}
	c.mu.Lock()
	if o := c.owned[p]; o != nil {
		o.end, o.fetched = hwm, true
	}
	c.mu.Unlock()
}
