package testkit

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/aggflow/aggflow/dispatch"
)

// byStart returns calls grouped by key(call), each group sorted by Start.
func byStart[K comparable](calls []Call, key func(Call) K) map[K][]Call {
	m := make(map[K][]Call)
	for _, c := range calls {
		m[key(c)] = append(m[key(c)], c)
	}
	for _, cs := range m {
		slices.SortFunc(cs, func(a, b Call) int { return cmp.Compare(a.Start, b.Start) })
	}
	return m
}

// firstViolation returns the violation with the smallest Start among those
// found by check on each group, so that the report does not depend on map
// order.
func firstViolation[K comparable](groups map[K][]Call, check func(prev, next Call) error) error {
	var first error
	var at int64
	for _, cs := range groups {
		for i := 1; i < len(cs); i++ {
			if err := check(cs[i-1], cs[i]); err != nil && (first == nil || cs[i].Start < at) {
				first, at = err, cs[i].Start
				break
			}
		}
	}
	return first
}

// PerKeyFIFO checks that the calls of every key started in the order of their
// sequence numbers, each sequence number at most once: the dispatcher's
// ordering contract for one aggregate id. Gaps are allowed (an exchange may be
// discarded or refused); use NoLoss for completeness. It returns nil or an
// error naming the first violation.
func PerKeyFIFO(calls []Call) error {
	return firstViolation(byStart(calls, func(c Call) string { return c.Key }), func(prev, next Call) error {
		if next.Seq <= prev.Seq {
			return fmt.Errorf("testkit: key %q: seq %d started (tick %d) after seq %d (tick %d)",
				next.Key, next.Seq, next.Start, prev.Seq, prev.Start)
		}
		return nil
	})
}

// GroupSerial checks that no two calls of one group overlapped: each started
// after the previous one of its group had returned. It returns nil or an error
// naming the first overlap.
func GroupSerial(calls []Call) error {
	return firstViolation(byStart(calls, func(c Call) int { return c.Group }), func(prev, next Call) error {
		if next.Start < prev.End {
			return fmt.Errorf("testkit: group %d: %q seq %d started (tick %d) before %q seq %d returned (tick %d)",
				next.Group, next.Key, next.Seq, next.Start, prev.Key, prev.Seq, prev.End)
		}
		return nil
	})
}

// NoLoss checks a stopped dispatcher's accounting against what its source
// emitted (counted by the test, with DoOnNext on the source, say) and the
// recorded calls: emitted == Received (nothing pulled was left uncounted),
// InFlight == 0 (every exchange ended as handled or discarded), no (key, seq)
// handled twice, and one call per handled exchange (len(calls) == Succeeded
// + Failed), so calls must record every handler invocation and no exchange
// may have failed before its handler (ErrInvalidGroupKey). Call it after the
// dispatcher's Done() is closed. It returns nil or an error naming the first
// discrepancy.
func NoLoss(emitted int64, stats dispatch.Stats, calls []Call) error {
	if emitted != stats.Received {
		return fmt.Errorf("testkit: the source emitted %d exchanges, the dispatcher received %d", emitted, stats.Received)
	}
	if stats.InFlight != 0 {
		return fmt.Errorf("testkit: %d exchanges still in flight", stats.InFlight)
	}
	seen := make(map[Tag]bool, len(calls))
	for _, c := range calls {
		t := Tag{Key: c.Key, Seq: c.Seq}
		if seen[t] {
			return fmt.Errorf("testkit: key %q seq %d handled twice", c.Key, c.Seq)
		}
		seen[t] = true
	}
	if handled := stats.Succeeded + stats.Failed; int64(len(calls)) != handled {
		return fmt.Errorf("testkit: %d handler calls recorded, but stats count %d handled (succeeded %d + failed %d)",
			len(calls), handled, stats.Succeeded, stats.Failed)
	}
	return nil
}
