package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/partition"
)

// The finished maps (see partition.FinishedMap) live in a KV bucket of
// their own, "<durable>-finished", one key per partition ("p.<n>"): the
// lease bucket's TTL would expire a crashed owner's map with its lease,
// just before the next owner looks for it. A value is the durable
// consumer's creation time (Unix ns) and the encoded map, separated by a
// space: a map written for a consumer deleted and made again (whose stream
// sequences may start over) is ignored.
func finishedBucket(durable string) string { return durable + "-finished" }

// mapEvery is the shortest time between two writes of a partition's map:
// at most one KV write per partition per mapEvery, off the per-message
// path. What finishes meanwhile is replayed after a crash. mapWait bounds a
// write: the acknowledging goroutine must not wait out a lost server (its
// lease, its release wait for it), and a map not written costs replays
// only.
const (
	mapEvery = 25 * time.Millisecond
	mapWait  = 250 * time.Millisecond
)

// openFinished creates the bucket of the finished maps, or opens it.
func openFinished(ctx context.Context, js natsjs.JetStream, bucket string) (natsjs.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: bucket, History: 1,
		Description: "aggflow finished maps: the positions finished above each partition's ack floor"})
	if errors.Is(err, natsjs.ErrBucketExists) {
		return js.KeyValue(ctx, bucket)
	}
	return kv, err
}

// readFinished returns what partition p's last owner recorded finished at
// or above from (its ack floor + 1), for consumer info: every position
// below the map's base (its prefix then: the ack that followed may not
// have reached the server) and the map's spans. None when there is no map,
// one of another consumer, or a malformed one (logged).
func (c *Consumer[T]) readFinished(ctx context.Context, p int32, info *natsjs.ConsumerInfo, from int64) partition.FinishedMap {
	skip := partition.FinishedMap{Base: from}
	if c.fm == nil {
		return skip
	}
	ctx, cancel := context.WithTimeout(ctx, mapWait) // a server recovering its streams: replay rather than wait
	defer cancel()
	e, err := c.fm.Get(ctx, leaseKey(p))
	if err != nil {
		if !errors.Is(err, natsjs.ErrKeyNotFound) {
			c.cfg.logger.Warn("jetstream: the finished map could not be read: the partition replays from its ack floor",
				slog.String("consumer", c.name), slog.Int("partition", int(p)), slog.Any("error", err))
		}
		return skip
	}
	tag, enc, _ := strings.Cut(string(e.Value()), " ")
	if tag != strconv.FormatInt(info.Created.UnixNano(), 10) {
		return skip
	}
	m, err := partition.DecodeFinishedMap(enc)
	if err != nil {
		c.cfg.logger.Warn("jetstream: finished map ignored: the partition replays from its ack floor",
			slog.String("consumer", c.name), slog.Int("partition", int(p)), slog.Any("error", err))
		return skip
	}
	if m.Base > from {
		skip.Spans = append(skip.Spans, partition.Span{First: from, Last: m.Base - 1})
	}
	for _, sp := range m.Spans {
		if sp.Last >= from {
			skip.Spans = append(skip.Spans, partition.Span{First: max(sp.First, from), Last: sp.Last})
		}
	}
	return skip
}

// skipped tracks msg as finished without delivering it: the partition's
// previous owner finished it. Its aggregate's positions below it finished
// too (see partition.FinishedMap), so nothing of it runs after it again.
func (pt *part[T]) skipped(msg natsjs.Msg, pos int64) bool {
	t := pt.in.Tracker()
	if err := t.Track(pos); err != nil {
		pt.c.reset(pt, "a redelivery behind the last position", slog.Int64("position", pos), slog.Any("error", err))
		return false
	}
	pt.held.push(pos, msg)
	_ = t.Finish(pos) // tracked just above: it cannot fail
	pt.c.skips.Add(1)
	select {
	case pt.poke <- struct{}{}:
	default:
	}
	return true
}

// writeFinished writes the partition's map when it changed, holds spans
// and the prefix did not move since the last call (a partition held below
// a slow exchange: one that flows acknowledges instead, and a crash
// replays what ran in its last acknowledgement's round trip), at most once
// per mapEvery (else it arms pt.mapTimer for the rest), or when final (a
// release's last, forced or not), before the acknowledgement of the
// prefix it is based on: a crash then finds the ack floor and the map, or
// an older floor and the map whose base says the positions up to it
// finished. On the acknowledging goroutine, or release's once it ended; a
// write costs one KV round trip.
func (pt *part[T]) writeFinished(prefix int64, ok, final bool) {
	c := pt.c
	if c.fm == nil {
		return
	}
	base := pt.from
	if ok {
		base = max(base, prefix+1)
	}
	if moved := base != pt.mapBase; moved && !final {
		pt.mapBase = base
		return
	}
	m := partition.FinishedMap{Base: base, Spans: pt.in.Tracker().FinishedAbove(base, nil)}
	if len(m.Spans) == 0 {
		return // the stored map, if any, claims only what finished
	}
	if wait := mapEvery - time.Since(pt.mapAt); wait > 0 && !final {
		pt.mapTimer.Reset(wait)
		return
	}
	enc, _, _ := m.Encode(partition.DefaultFinishedMapLen) // FinishedAbove's spans are valid
	if enc == pt.mapLast || !c.js.Conn().IsConnected() {
		return // unchanged, or the connection is down: the reset that follows writes it
	}
	ctx, cancel := context.WithTimeout(c.runCtx, min(c.cfg.timeout, mapWait))
	defer cancel()
	pt.mapAt = time.Now()
	if _, err := c.fm.Put(ctx, leaseKey(pt.p), []byte(pt.mapTag+" "+enc)); err != nil {
		c.cfg.logger.Debug("jetstream: finished map not written", slog.String("consumer", c.name),
			slog.Int("partition", int(pt.p)), slog.Any("error", err))
		return
	}
	pt.mapLast = enc
}
