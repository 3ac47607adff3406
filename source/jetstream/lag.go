package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/component"
)

// caughtUpEvery is how often CaughtUp looks at the owned partitions'
// prefixes.
const caughtUpEvery = 10 * time.Millisecond

// Lag returns, per owned partition, how many of its messages have not
// finished here: those the server had left to deliver after the last one
// delivered (its metadata's NumPending) and those delivered above the
// finished prefix, finished or not. Messages a failure policy or the reject
// hook settled count as finished. It sends nothing, so messages published
// since the last delivery are not counted. Safe for concurrent use;
// O(partitions owned × log(messages held)).
func (c *Consumer[T]) Lag() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	lag := make(map[int32]int64, len(c.parts))
	for p, pt := range c.parts {
		lag[p] = pt.lag()
	}
	return lag
}

// CaughtUp reads the stream's last sequence on the subject of every
// partition owned (one request per partition, a last-message get, which
// returns the message too) and returns nil once each has finished every
// message up to it, the messages a failure policy or the reject hook
// settled included: what the stream held at the call has been handled.
// Ownership is looked at as it is then: a partition released meanwhile is
// not waited for (its next owner handles what is left), one claimed
// meanwhile is waited for up to its last sequence read when it is first
// seen (one request more), and a member that owns no partition waits until
// it owns one. It returns ctx's error wrapped, naming the partitions still
// behind and by how many messages (Lag); an error wrapping ErrIllegalState
// when the consumer is not running or stops meanwhile; a request's error.
// Cost: the requests, then a look at the owned partitions' prefixes every
// 10 ms while it waits. Safe for concurrent use.
func (c *Consumer[T]) CaughtUp(ctx context.Context) error {
	if s := c.State(); s != component.StateRunning {
		return fmt.Errorf("%w: consumer %q: caught up: not running (%v)", ErrIllegalState, c.name, s)
	}
	last := map[int32]int64{}
	tick := time.NewTicker(caughtUpEvery)
	defer tick.Stop()
	for {
		for _, p := range c.Owned() {
			if _, ok := last[p]; ok {
				continue
			}
			seq, err := c.lastSeq(ctx, p)
			if err != nil {
				return err
			}
			last[p] = seq
		}
		behind, owns := c.behind(last)
		if owns && behind == "" {
			return nil
		}
		if s := c.State(); s != component.StateRunning {
			return fmt.Errorf("%w: consumer %q: caught up: stopped meanwhile (%v)", ErrIllegalState, c.name, s)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if !owns {
				behind = "owns no partition"
			}
			return fmt.Errorf("jetstream: consumer %q: not caught up: %s: %w", c.name, behind, ctx.Err())
		}
	}
}

// lastSeq returns the stream's last sequence on partition p's subject, 0
// when it holds none.
func (c *Consumer[T]) lastSeq(ctx context.Context, p int32) (int64, error) {
	c.mu.Lock()
	stream := c.stream
	c.mu.Unlock()
	m, err := stream.GetLastMsgForSubject(ctx, c.topo.Subject(p))
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("jetstream: consumer %q: last sequence of partition %d: %w", c.name, p, err)
	}
	return int64(m.Sequence), nil
}

// behind describes the owned partitions that have not finished up to their
// sequence in last ("" when none is), and reports whether any is owned.
func (c *Consumer[T]) behind(last map[int32]int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.parts))
	for p, pt := range c.parts {
		if seq, ok := last[p]; ok && pt.finished() < seq {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		pt := c.parts[p]
		fmt.Fprintf(&b, "partition %d: %d behind (finished to sequence %d, last %d)", p, pt.lag(), pt.finished(), last[p])
	}
	return b.String(), len(c.parts) > 0
}

// finished is the partition's finished prefix, or the position before the
// first it expected (its ack floor) when none has finished.
func (pt *part[T]) finished() int64 {
	if pos, ok := pt.in.Prefix(); ok {
		return pos
	}
	return pt.from - 1
}

// lag is Lag's count for the partition.
func (pt *part[T]) lag() int64 {
	return int64(pt.pending.Load()) + int64(pt.held.above(pt.finished()))
}

// above returns how many messages held are above pos.
func (h *held) above(pos int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The ring is in position order from head: the first above pos is
	// found by bisection.
	lo, hi := 0, h.size
	for lo < hi {
		mid := (lo + hi) / 2
		if h.ring[(h.head+mid)%len(h.ring)].pos <= pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return h.size - lo
}
