package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// assignMode is the -assign flag: how the consumer processes share the
// partitions.
type assignMode int

const (
	// assignStatic: each process is told its 4 partitions (consumerOwns).
	assignStatic assignMode = iota
	// assignDynamic: the processes are members of a dynamic assignment
	// (consumerMembers) and claim the partitions through leases; see
	// conductor.
	assignDynamic
)

var assignModes = []string{assignStatic: "static", assignDynamic: "dynamic"}

// leaseTTL is the members' lease TTL by default (-lease-ttl): short, so
// that the demo's handoff (a renewal round of each member, TTL/4) takes
// about a second.
const leaseTTL = 2 * time.Second

// consumerMembers are the members of -assign dynamic, in the order they
// start consuming.
var consumerMembers = []string{"a", "b"}

// memberEnv, set with consumerEnv, makes the consumer process a member of
// a dynamic assignment, named by its value.
const memberEnv = "AGGFLOW_FLIGHTS_MEMBER"

// Bounds of the conductor's waits: for the leases to reach what it awaits,
// and between two moves of the partitions' acknowledgements.
const (
	settleTimeout   = 30 * time.Second
	progressTimeout = 30 * time.Second
	pollEvery       = 20 * time.Millisecond
)

// conductor drives a dynamic run from the parent: with the first half of
// the flights published and both members started, it waits until member a
// holds every partition, lets b start (goAhead), waits until a has handed b
// its half (each holding N/2), publishes the second half, so that b folds
// flights of airports whose first flights a folded, and waits until every
// partition is acknowledged to its last message; then it stops the members
// gracefully (SIGTERM), as it does after a failure. The handoff is done
// when b renewed the leases of its half: it renews them in the round after
// it claimed and opened them. It follows the lease
// keys of the bucket all along (see leaseView).
type conductor struct {
	js      natsjs.JetStream
	flights []flightdata.Flight // the second half
	data    *flightdata.Dataset
	procs   []*consumerProc
	goAhead io.Closer // b's standard input

	view     *leaseView
	handoff  time.Duration // from b's go-ahead until a and b held N/2 each
	publish  time.Duration // of the second half
	finished bool          // every partition acknowledged to its end
	err      error
}

// run conducts until the end or ctx's, then stops the members. Its fields
// are its results, to read once it returned.
func (c *conductor) run(ctx context.Context) {
	c.view = newLeaseView()
	if err := c.conduct(ctx); err != nil && ctx.Err() == nil {
		c.err = err
	}
	_ = c.goAhead.Close() // a member that never got its go-ahead stops on SIGTERM all the same
	for _, p := range c.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

func (c *conductor) conduct(ctx context.Context) error {
	n := flightsTopology.Partitions
	kv, err := c.leaseBucket(ctx)
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, "p.*")
	if err != nil {
		return fmt.Errorf("flights: watching the leases: %w", err)
	}
	defer func() { _ = w.Stop() }()
	first, second := consumerMembers[0], consumerMembers[1]
	if err := c.until(ctx, w, func() bool { return c.view.held(first) == n }); err != nil {
		return fmt.Errorf("flights: waiting for member %s to hold the %d partitions: %w", first, n, err)
	}
	start := time.Now()
	if err := c.goAhead.Close(); err != nil {
		return err
	}
	share := (n + 1) / 2
	// renewed: a member renews a lease in the round after the claim, once
	// it reset the durable consumer and fetches; a publication before that
	// could reach a pull request the old owner gave up, and come to the new
	// one as a redelivery.
	if err := c.until(ctx, w, func() bool { return c.view.renewed(second) == share && c.view.held(first) == n-share }); err != nil {
		return fmt.Errorf("flights: waiting for member %s to take %d partitions from %s: %w", second, share, first, err)
	}
	c.handoff = time.Since(start)
	start = time.Now()
	if err := publishFlights(c.js, c.data, c.flights); err != nil {
		return err
	}
	c.publish = time.Since(start)
	last, err := lastPositions(ctx, c.js)
	if err != nil {
		return err
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var floors []uint64
	moved := time.Now()
	for {
		select {
		case e := <-w.Updates():
			c.view.see(e)
		case <-tick.C:
			now, err := ackFloors(ctx, c.js)
			if err != nil {
				return err
			}
			if !slices.Equal(now, floors) {
				floors, moved = now, time.Now()
			}
			if acknowledged(floors, last) {
				c.finished = true
				return nil
			}
			if time.Since(moved) > progressTimeout {
				return fmt.Errorf("%w: acknowledged %v of %v, no move for %v", errStalled, floors, last, progressTimeout)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// until follows the leases until cond holds, for at most settleTimeout.
func (c *conductor) until(ctx context.Context, w natsjs.KeyWatcher, cond func() bool) error {
	timeout := time.NewTimer(settleTimeout)
	defer timeout.Stop()
	for !cond() {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("flights: the lease watcher stopped")
			}
			c.view.see(e)
		case <-timeout.C:
			return fmt.Errorf("%w: %v", errStalled, c.view)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// leaseBucket waits, for at most settleTimeout, for the members' lease
// bucket, which the first member's Prepare creates.
func (c *conductor) leaseBucket(ctx context.Context) (natsjs.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		kv, err := c.js.KeyValue(ctx, job.DispatcherName+"-leases")
		if err == nil {
			return kv, nil
		}
		if !errors.Is(err, natsjs.ErrBucketNotFound) {
			return nil, fmt.Errorf("flights: the lease bucket: %w", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("flights: the lease bucket: %w", ctx.Err())
		}
	}
}

// leaseView follows the lease keys of the members' bucket, as
// docs/scale-out.md lays them out: p.<partition>, whose value is
// "<member>" as claimed and "<member> <epoch>" once renewed, the epoch
// being the KV revision of the claim; deleted by a graceful release. It
// counts each member's claims (a new epoch of a key) and releases (a
// delete of a key it held). A lease that expires leaves no entry.
type leaseView struct {
	holder           map[string]string // by key
	epoch            map[string]uint64 // by key
	renewal          map[string]bool   // by key: the value has the epoch
	claims, releases map[string]int    // by member
}

func newLeaseView() *leaseView {
	return &leaseView{holder: map[string]string{}, epoch: map[string]uint64{}, renewal: map[string]bool{},
		claims: map[string]int{}, releases: map[string]int{}}
}

// see takes one entry of the watcher (nil marks the end of the initial
// values).
func (v *leaseView) see(e natsjs.KeyValueEntry) {
	if e == nil {
		return
	}
	k := e.Key()
	switch e.Operation() {
	case natsjs.KeyValuePut:
		member, epoch, renewed := string(e.Value()), e.Revision(), false
		if m, ep, ok := strings.Cut(member, " "); ok {
			if n, err := strconv.ParseUint(ep, 10, 64); err == nil {
				member, epoch, renewed = m, n, true
			}
		}
		v.renewal[k] = renewed
		if v.epoch[k] != epoch {
			v.claims[member]++
			v.epoch[k] = epoch
		}
		v.holder[k] = member
	case natsjs.KeyValueDelete, natsjs.KeyValuePurge:
		if m, ok := v.holder[k]; ok {
			v.releases[m]++
		}
		delete(v.holder, k)
		delete(v.epoch, k)
		delete(v.renewal, k)
	}
}

// held counts the partitions member holds.
func (v *leaseView) held(member string) int {
	n := 0
	for _, m := range v.holder {
		if m == member {
			n++
		}
	}
	return n
}

// renewed counts the partitions member holds and renewed since its claim.
func (v *leaseView) renewed(member string) int {
	n := 0
	for k, m := range v.holder {
		if m == member && v.renewal[k] {
			n++
		}
	}
	return n
}

func (v *leaseView) String() string {
	var b strings.Builder
	for _, m := range consumerMembers {
		fmt.Fprintf(&b, "%s holds %d (%d renewed), ", m, v.held(m), v.renewed(m))
	}
	return strings.TrimSuffix(b.String(), ", ")
}

// lastPositions returns the stream position of the last message of each
// partition (0 for an empty one).
func lastPositions(ctx context.Context, js natsjs.JetStream) ([]uint64, error) {
	s, err := js.Stream(ctx, flightsTopology.Stream)
	if err != nil {
		return nil, err
	}
	last := make([]uint64, flightsTopology.Partitions)
	for p := range last {
		m, err := s.GetLastMsgForSubject(ctx, flightsTopology.Subject(int32(p)))
		switch {
		case errors.Is(err, natsjs.ErrMsgNotFound):
		case err != nil:
			return nil, fmt.Errorf("flights: last message of partition %d: %w", p, err)
		default:
			last[p] = m.Sequence
		}
	}
	return last, nil
}

// ackFloors returns the ack floor (a stream position) of each partition's
// durable consumer, "<durable>-<p>"; 0 for one not made yet.
func ackFloors(ctx context.Context, js natsjs.JetStream) ([]uint64, error) {
	floors := make([]uint64, flightsTopology.Partitions)
	for p := range floors {
		c, err := js.Consumer(ctx, flightsTopology.Stream, job.DispatcherName+"-"+strconv.Itoa(p))
		if errors.Is(err, natsjs.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("flights: durable consumer of partition %d: %w", p, err)
		}
		floors[p] = c.CachedInfo().AckFloor.Stream // fetched by Consumer
	}
	return floors, nil
}

// acknowledged says whether every partition's floor reached its last
// position.
func acknowledged(floors, last []uint64) bool {
	if len(floors) != len(last) {
		return false
	}
	for p := range last {
		if floors[p] < last[p] {
			return false
		}
	}
	return true
}
