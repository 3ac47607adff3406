package dispatch_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// edgeLedger records every handler call and every discard, per aggregate id.
type edgeLedger struct {
	mu        sync.Mutex
	handled   map[string][]int
	discarded map[string][]int
	hook      atomic.Int64
	calls     atomic.Int64
}

func newBrkLedger() *edgeLedger {
	return &edgeLedger{handled: map[string][]int{}, discarded: map[string][]int{}}
}

func (l *edgeLedger) handle(x testkit.Exchange) {
	l.calls.Add(1)
	l.mu.Lock()
	l.handled[x.ID.ID] = append(l.handled[x.ID.ID], x.Seq)
	l.mu.Unlock()
}

func (l *edgeLedger) discard(x testkit.Exchange, _ error) {
	l.hook.Add(1)
	l.mu.Lock()
	l.discarded[x.ID.ID] = append(l.discarded[x.ID.ID], x.Seq)
	l.mu.Unlock()
}

// check verifies, once the dispatcher is done: the Stats identity, InFlight
// 0, one hook call per discard, per id: handled in order, each exchange
// handled or discarded exactly once, the union a prefix of the id's
// sequence, and nothing handled after something of the same id was
// discarded.
func (l *edgeLedger) check(s dispatch.Stats, obs *countingObserver) error {
	var errs []error
	if s.Received != s.Succeeded+s.Failed+s.Discarded+s.InFlight || s.InFlight != 0 {
		errs = append(errs, fmt.Errorf("stats %+v after Done", s))
	}
	if l.hook.Load() != s.Discarded {
		errs = append(errs, fmt.Errorf("discard hook called %d times, Discarded %d", l.hook.Load(), s.Discarded))
	}
	if obs != nil && obs.discarded.Load() != s.Discarded {
		errs = append(errs, fmt.Errorf("Observer.Discarded called %d times, Discarded %d", obs.discarded.Load(), s.Discarded))
	}
	if obs != nil && obs.finishedTotal() != s.Succeeded+s.Failed {
		errs = append(errs, fmt.Errorf("Observer.Finished called %d times, Succeeded+Failed %d", obs.finishedTotal(), s.Succeeded+s.Failed))
	}
	if l.calls.Load() != s.Succeeded+s.Failed {
		errs = append(errs, fmt.Errorf("handler called %d times, Succeeded+Failed %d", l.calls.Load(), s.Succeeded+s.Failed))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var total int64
	ids := map[string]bool{}
	for id := range l.handled {
		ids[id] = true
	}
	for id := range l.discarded {
		ids[id] = true
	}
	for id := range ids {
		h, dsc := l.handled[id], l.discarded[id]
		for i := 1; i < len(h); i++ {
			if h[i] <= h[i-1] {
				errs = append(errs, fmt.Errorf("id %s handled out of order: %v", id, h))
				break
			}
		}
		seen := map[int]int{}
		for _, q := range h {
			seen[q]++
		}
		for _, q := range dsc {
			seen[q]++
		}
		for q := range len(h) + len(dsc) {
			if seen[q] != 1 {
				errs = append(errs, fmt.Errorf("id %s: seq %d seen %d times (handled %v, discarded %v)", id, q, seen[q], h, dsc))
				break
			}
		}
		if len(dsc) > 0 && len(h) > 0 {
			minD := dsc[0]
			for _, q := range dsc {
				minD = min(minD, q)
			}
			if h[len(h)-1] > minD {
				errs = append(errs, fmt.Errorf("id %s: seq %d handled after seq %d was discarded", id, h[len(h)-1], minD))
			}
		}
		total += int64(len(h) + len(dsc))
	}
	if total != s.Received {
		errs = append(errs, fmt.Errorf("ledger holds %d exchanges, Received %d", total, s.Received))
	}
	return errors.Join(errs...)
}
