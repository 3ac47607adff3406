package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aggflow/aggflow/source/jetstream"
)

// With a dynamic assignment a partition changes hands during the run, and
// its airports' states must follow it: the fold of an airport is one
// sequence, whichever member applied each flight. Each member serves the
// states it holds (with the position of the last flight applied to each)
// on its own subject; a member that applies the first flight of a partition
// under a new lease first asks the other members for that partition's
// states and adopts those further on than its own. After a graceful
// handoff the old owner had drained and acknowledged the partition before
// its lease was deleted, so what it serves is final; the positions make an
// in-order replay (after a loss) harmless: a flight at or below an
// airport's last position is skipped, and counted.

// stateRequestTimeout bounds a member's request for another's states.
const stateRequestTimeout = 5 * time.Second

// stateSubject is the subject on which member serves its states.
func stateSubject(member string) string { return "flights-states." + member }

// serveStates answers, on member's subject, the requests for a partition's
// states (the partition's number in the data) with held's states of the
// airports of that partition, as a JSON map by airport code.
func serveStates(nc *nats.Conn, member string, held *airports) (*nats.Subscription, error) {
	return nc.Subscribe(stateSubject(member), func(m *nats.Msg) {
		p, err := strconv.ParseInt(string(m.Data), 10, 32)
		if err != nil {
			return // not a request of this program: the requester times out
		}
		b, err := json.Marshal(held.snapshot(func(code string) bool { return flightsTopology.PartitionOf(code) == int32(p) }))
		if err == nil {
			_ = m.Respond(b)
		}
	})
}

// takeovers brings, once per claim (partition and epoch), the partition's
// airports up to the most advanced states the other members hold.
type takeovers struct {
	nc      *nats.Conn
	peers   []string
	held    *airports
	adopted atomic.Int64 // airport states taken from another member

	mu     sync.Mutex
	claims map[int32]*takeover // the latest claim of each partition seen
}

// takeover is one claim's fetch of states; done is closed once err is set.
type takeover struct {
	epoch uint64
	done  chan struct{}
	err   error
}

// newTakeovers returns the takeovers of member, whose peers are the other
// consumerMembers.
func newTakeovers(nc *nats.Conn, member string, held *airports) *takeovers {
	t := &takeovers{nc: nc, held: held, claims: map[int32]*takeover{}}
	for _, m := range consumerMembers {
		if m != member {
			t.peers = append(t.peers, m)
		}
	}
	return t
}

// ensure returns once the states of l's partition were fetched for l's
// claim: the first handler of the claim fetches them, the others wait (or
// give up with their ctx). A failed fetch fails every flight of the claim.
func (t *takeovers) ensure(ctx context.Context, l jetstream.Lease) error {
	t.mu.Lock()
	tk := t.claims[l.Partition]
	if tk == nil || l.Epoch > tk.epoch {
		tk = &takeover{epoch: l.Epoch, done: make(chan struct{})}
		t.claims[l.Partition] = tk
		t.mu.Unlock()
		tk.err = t.fetch(ctx, l.Partition)
		close(tk.done)
		return tk.err
	}
	t.mu.Unlock()
	select {
	case <-tk.done:
		return tk.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetch asks every peer for partition p's states and adopts those further
// on. A peer that is not connected (no responders) holds none.
func (t *takeovers) fetch(ctx context.Context, p int32) error {
	for _, peer := range t.peers {
		rctx, cancel := context.WithTimeout(ctx, stateRequestTimeout)
		m, err := t.nc.RequestWithContext(rctx, stateSubject(peer), []byte(strconv.Itoa(int(p))))
		cancel()
		if errors.Is(err, nats.ErrNoResponders) {
			continue
		}
		if err != nil {
			return fmt.Errorf("flights: states of partition %d from member %s: %w", p, peer, err)
		}
		var states map[string]airportState
		if err := json.Unmarshal(m.Data, &states); err != nil {
			return fmt.Errorf("flights: states of partition %d from member %s: %w", p, peer, err)
		}
		for code, s := range states {
			if t.held.adopt(code, s) {
				t.adopted.Add(1)
			}
		}
	}
	return nil
}
