package partition

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Span is a run of positions First..Last, both included.
type Span struct{ First, Last int64 }

// FinishedMap is the record of the positions a partition finished above its
// acknowledged prefix: Base is the position acknowledged (Kafka's committed
// offset: the next one to read; JetStream's ack floor + 1), Spans the
// finished positions at or above it, ascending and disjoint. A crash
// replays from Base; the next owner skips what Spans holds, so it replays
// only what had not finished.
//
// Skipping never reorders an aggregate: a partition's handler runs one
// aggregate's exchanges one at a time in position order, so an aggregate's
// finished positions above the prefix are a prefix of its own positions
// above it; what is replayed of it comes after what is skipped.
type FinishedMap struct {
	Base  int64
	Spans []Span
}

// FinishedMapPrefix starts every encoded FinishedMap; its digit is the
// format's version. Metadata without it is another writer's (or none): no
// map, the partition replays from its base.
const FinishedMapPrefix = "aggflow-fm1:"

// The encoded payload, after the prefix, is base64 (standard alphabet,
// unpadded, so that Kafka's string metadata stays valid UTF-8) of a flag
// byte (0 raw, 1 DEFLATE of the rest) and the body: varint Base, then per
// span uvarint(First - start) and uvarint(Last - First), start being Base
// for the first span and the previous Last + 2 after it (spans are
// disjoint and not adjacent, so every encoding is canonical).
const (
	rawBody   = 0
	flateBody = 1
	// maxBody bounds a decompressed body: a crafted input cannot make the
	// decoder allocate more (4 KiB of DEFLATE could expand to megabytes).
	maxBody = 1 << 16
)

// DefaultFinishedMapLen is the longest encoding the bindings write: Kafka's
// offset.metadata.max.bytes is 4096 by default (kfake has no limit), and a
// JetStream KV value takes it too.
const DefaultFinishedMapLen = 4000

// Errors of the FinishedMap decoder.
var (
	// ErrNotFinishedMap is returned by DecodeFinishedMap for a string that
	// is no FinishedMap (empty, or another writer's metadata): replay all.
	ErrNotFinishedMap = errors.New("partition: not a finished map")
	// ErrFinishedMap is returned by DecodeFinishedMap for a FinishedMap
	// that is malformed (bad base64, flag, DEFLATE, varint, a span out of
	// order or overflowing, trailing bytes, too long).
	ErrFinishedMap = errors.New("partition: malformed finished map")
)

// Encode returns m encoded in at most maxLen bytes (DefaultFinishedMapLen
// when maxLen <= 0), compressed when that is shorter, and how many of
// m.Spans it holds. When the whole map does not fit, the encoding holds the
// longest prefix of the spans that does: it never claims a position m does
// not, and the positions of the spans left out are replayed after a crash
// (a span costs 2 to 20 bytes whatever its length, so a map that does not
// fit is one fragmented by many unfinished positions). kept is -1 when not
// even the map with no span fits (maxLen below about 20): nothing is
// written then. Spans must be ascending, at or above Base, with a position
// between any two (Tracker.FinishedAbove makes them so); else the error
// wraps ErrInvalidArgument. Cost: O(len(Spans)) time, times
// log(len(Spans)) and a DEFLATE pass each when it does not fit raw.
func (m FinishedMap) Encode(maxLen int) (s string, kept int, err error) {
	if maxLen <= 0 {
		maxLen = DefaultFinishedMapLen
	}
	start := m.Base
	for i, sp := range m.Spans {
		if sp.First < start || sp.Last < sp.First {
			return "", 0, fmt.Errorf("%w: finished map: span %d (%d..%d) not above %d", ErrInvalidArgument, i, sp.First, sp.Last, start)
		}
		if sp.Last > math.MaxInt64-2 && i < len(m.Spans)-1 {
			return "", 0, fmt.Errorf("%w: finished map: span %d ends at the last position", ErrInvalidArgument, i)
		}
		start = sp.Last + 2
	}
	if s, ok := m.encodeFit(len(m.Spans), maxLen); ok {
		return s, len(m.Spans), nil
	}
	// The largest number of spans that fits, by bisection: n spans fit, hi
	// do not.
	lo, hi := -1, len(m.Spans)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, ok := m.encodeFit(mid, maxLen); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo < 0 {
		return "", -1, nil
	}
	s, _ = m.encodeFit(lo, maxLen)
	return s, lo, nil
}

// encodeFit encodes the first n spans, raw or compressed, whichever is
// shorter, and reports whether it fits in maxLen.
func (m FinishedMap) encodeFit(n, maxLen int) (string, bool) {
	body := binary.AppendVarint(nil, m.Base)
	start := m.Base
	for _, sp := range m.Spans[:n] {
		body = binary.AppendUvarint(body, uint64(sp.First-start))
		body = binary.AppendUvarint(body, uint64(sp.Last-sp.First))
		start = sp.Last + 2
	}
	payload := append([]byte{rawBody}, body...)
	if base64.RawStdEncoding.EncodedLen(len(payload))+len(FinishedMapPrefix) > maxLen && len(body) > 64 {
		var b bytes.Buffer
		b.WriteByte(flateBody)
		w, _ := flate.NewWriter(&b, flate.BestCompression) // a valid level: no error
		_, _ = w.Write(body)                               // into a bytes.Buffer: no error
		_ = w.Close()
		if b.Len() < len(payload) {
			payload = b.Bytes()
		}
	}
	s := FinishedMapPrefix + base64.RawStdEncoding.EncodeToString(payload)
	return s, len(s) <= maxLen
}

// DecodeFinishedMap decodes s, written by Encode. A string without
// FinishedMapPrefix returns ErrNotFinishedMap; a malformed one,
// ErrFinishedMap. It never panics, and allocates O(len(s)) at most
// (the body is bounded to 64 KiB decompressed).
func DecodeFinishedMap(s string) (FinishedMap, error) {
	rest, ok := strings.CutPrefix(s, FinishedMapPrefix)
	if !ok {
		return FinishedMap{}, ErrNotFinishedMap
	}
	bad := func(why string) (FinishedMap, error) {
		return FinishedMap{}, fmt.Errorf("%w: %s", ErrFinishedMap, why)
	}
	payload, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return bad("base64: " + err.Error())
	}
	if len(payload) == 0 {
		return bad("empty")
	}
	body := payload[1:]
	switch payload[0] {
	case rawBody:
	case flateBody:
		r := flate.NewReader(bytes.NewReader(body))
		body, err = io.ReadAll(io.LimitReader(r, maxBody+1))
		if err != nil {
			return bad("deflate: " + err.Error())
		}
		if len(body) > maxBody {
			return bad("body above 64 KiB")
		}
	default:
		return bad(fmt.Sprintf("flag %d", payload[0]))
	}
	base, n := binary.Varint(body)
	if n <= 0 {
		return bad("base")
	}
	body = body[n:]
	m := FinishedMap{Base: base}
	start := base
	for len(body) > 0 {
		gap, n := binary.Uvarint(body)
		if n <= 0 {
			return bad("span start")
		}
		body = body[n:]
		length, n := binary.Uvarint(body)
		if n <= 0 {
			return bad("span length")
		}
		body = body[n:]
		if gap > uint64(math.MaxInt64-start) {
			return bad("span start overflows")
		}
		first := start + int64(gap)
		if length > uint64(math.MaxInt64-first) {
			return bad("span end overflows")
		}
		last := first + int64(length)
		m.Spans = append(m.Spans, Span{First: first, Last: last})
		if last > math.MaxInt64-2 {
			if len(body) > 0 {
				return bad("span after the last position")
			}
			break
		}
		start = last + 2
	}
	return m, nil
}

// Contains reports whether pos is in one of m's spans. O(log len(Spans)).
func (m FinishedMap) Contains(pos int64) bool {
	_, found := slices.BinarySearchFunc(m.Spans, pos, func(sp Span, p int64) int {
		switch {
		case sp.Last < p:
			return -1
		case sp.First > p:
			return 1
		}
		return 0
	})
	return found
}

// Positions returns how many positions m's spans hold.
func (m FinishedMap) Positions() int64 {
	var n int64
	for _, sp := range m.Spans {
		n += sp.Last - sp.First + 1
	}
	return n
}
