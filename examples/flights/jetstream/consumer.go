package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// consumerStopTimeout bounds a consumer process's graceful stop.
const consumerStopTimeout = 30 * time.Second

// assignment is a consumer process's share of the partitions: those it
// owns (static), or the member it is (dynamic, member not empty).
type assignment struct {
	own    []int32
	member string
}

// assignmentFromEnv reads memberEnv, or else ownEnv.
func assignmentFromEnv() (assignment, error) {
	if m := os.Getenv(memberEnv); m != "" {
		return assignment{member: m}, nil
	}
	own, err := ownedPartitions(os.Getenv(ownEnv))
	return assignment{own: own}, err
}

// consumerMain is a consumer process: with a static
// assignment it consumes its partitions (ownEnv) until it handled all they
// held when it started; as a member of a dynamic one (memberEnv) it starts
// once its standard input is closed (the parent's go-ahead) and consumes
// what it claims until SIGTERM. SIGTERM stops either gracefully. It writes
// its report on stdout and returns the exit status.
func consumerMain(url string, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return job.ExitUsage
	}
	as, err := assignmentFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return job.ExitUsage
	}
	goAhead := make(chan struct{})
	if as.member == "" {
		close(goAhead)
	} else {
		go func() { // ends with the process, or at the go-ahead
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(goAhead)
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r, err := consume(ctx, cfg, url, as, goAhead)
	if err != nil {
		r.Error = err.Error()
	}
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		fmt.Fprintln(stderr, "flights: consumer:", err)
		return job.ExitFailed
	}
	if r.Error != "" {
		return job.ExitFailed
	}
	return job.ExitOK
}

// heldAirport is an airport's state in a consumer process, with the
// stream position of the last flight applied to it. Its handler and the
// state requests of another member (see serveStates) take the lock.
type heldAirport struct {
	mu sync.Mutex
	airportState
}

// airportState is an airport's state and the position of the last flight
// it applied, as a member reports and hands it over.
type airportState struct {
	State    airport.State `json:"state"`
	Position int64         `json:"position"`
}

// airports holds a consumer process's states by airport code.
type airports struct {
	mu     sync.Mutex
	states map[string]*heldAirport
}

func (a *airports) of(code string) *heldAirport {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.states[code]
	if st == nil {
		st = new(heldAirport)
		a.states[code] = st
	}
	return st
}

// apply folds d's flight into its airport's state, unless d is at or
// below the last position applied (an in-order replay, after a loss): it
// says whether it applied it.
func (a *airports) apply(d partition.Delivery[job.Departure]) bool {
	st := a.of(d.Exchange.OriginCode)
	st.mu.Lock()
	defer st.mu.Unlock()
	if d.Position <= st.Position {
		return false
	}
	st.State.Apply(d.Exchange.Flight)
	st.Position = d.Position
	return true
}

// adopt takes s as code's state if it is further on (a higher position)
// than the one held, and says whether it did.
func (a *airports) adopt(code string, s airportState) bool {
	st := a.of(code)
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.Position <= st.Position {
		return false
	}
	st.airportState = s
	return true
}

// snapshot copies the states of the airports keep selects (every airport
// for a nil keep) that have applied a flight.
func (a *airports) snapshot(keep func(code string) bool) map[string]airportState {
	a.mu.Lock()
	held := make(map[string]*heldAirport, len(a.states))
	for code, st := range a.states {
		if keep == nil || keep(code) {
			held[code] = st
		}
	}
	a.mu.Unlock()
	out := make(map[string]airportState, len(held))
	for code, st := range held {
		st.mu.Lock()
		if st.Position > 0 {
			out[code] = st.airportState
		}
		st.mu.Unlock()
	}
	return out
}

// consume runs the consumer until its partitions' flights are handled
// (static), or ctx ends, and reports. A member starts once goAhead is
// closed.
func consume(ctx context.Context, cfg config, url string, as assignment, goAhead <-chan struct{}) (consumerReport, error) {
	report := consumerReport{Member: as.member, States: map[string]airportState{}}
	nc, js, err := jetstream.Connect(url)
	if err != nil {
		return report, err
	}
	defer nc.Close()
	sched, err := schedulers.NewParallel("flights", cfg.Pool)
	if err != nil {
		return report, err
	}
	defer sched.Dispose()

	held := &airports{states: map[string]*heldAirport{}}
	take := newTakeovers(nc, as.member, held)
	var applied, replayed, redelivered atomic.Int64
	handle := func(ctx context.Context, d partition.Delivery[job.Departure]) error {
		if l, ok := jetstream.LeaseOf(ctx); ok && as.member != "" { // a static owner has no peer to take states from
			if err := take.ensure(ctx, l); err != nil {
				return err
			}
		}
		job.Burn(ctx, cfg.HandlerCost)
		if d.Redelivered() {
			redelivered.Add(1)
		}
		if !held.apply(d) {
			replayed.Add(1)
			return nil
		}
		applied.Add(1)
		return nil
	}
	obs := &job.Observer{}
	opts := []jetstream.Option{
		jetstream.WithMaxPending(cfg.MaxPending),
		jetstream.WithPartitionOptions(partition.WithGroups(cfg.Parallelism),
			partition.WithDispatchOptions(dispatch.WithObserver(obs))),
	}
	if as.member != "" {
		opts = append(opts, jetstream.WithDynamicAssignment(as.member, cfg.leaseTTL))
		sub, err := serveStates(nc, as.member, held)
		if err != nil {
			return report, err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	c, err := jetstream.NewConsumer(job.DispatcherName, jetstream.Subscription{JetStream: js, Topology: flightsTopology, Owned: as.own},
		job.AirportAggregate, sched, jetstream.Codec[job.Departure]{Decode: decodeFlight, ID: func(d job.Departure) string { return d.OriginCode }}, handle,
		opts...)
	if err != nil {
		return report, err
	}
	if err := c.Prepare(ctx); err != nil {
		return report, err
	}
	select {
	case <-goAhead:
	case <-ctx.Done(): // stopped before it joined: the stop below ends it at once
	}
	if ctx.Err() == nil {
		if err := c.Start(); err != nil {
			return report, err
		}
	}
	var caught error
	if as.member == "" && ctx.Err() == nil {
		// A static owner runs until every flight the stream held is
		// handled (the stream was filled before it started), or ctx ends,
		// or the consumer fails (the stop below reports it).
		if caught = c.CaughtUp(ctx); ctx.Err() != nil || errors.Is(caught, jetstream.ErrIllegalState) {
			caught = nil
		}
	} else { // a member runs until SIGTERM
		select {
		case <-ctx.Done():
		case <-c.Done():
		}
	}
	report.Partitions = c.Owned()
	stopCtx, cancel := context.WithTimeout(context.Background(), consumerStopTimeout)
	defer cancel()
	if err = c.StopGracefully(stopCtx); stopCtx.Err() != nil {
		c.ForceStop()
		<-c.Done()
	}
	st := c.Stats()
	x := st.Exchanges
	report.Exchanges = job.Counts{Received: x.Received, Succeeded: x.Succeeded, Failed: x.Failed, Discarded: x.Discarded, InFlight: x.InFlight}
	report.Acks, report.Duplicates = st.Acks, st.Duplicates
	report.Applied, report.Replayed, report.Redelivered = applied.Load(), replayed.Load(), redelivered.Load()
	report.Adopted = take.adopted.Load()
	report.QueueWait, report.Handling = obs.Percentiles()
	report.States = held.snapshot(nil)
	return report, errors.Join(caught, err)
}
