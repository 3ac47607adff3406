package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// The flights go through NATS JetStream. The program starts an embedded
// server, publishes every flight in file order on the partition of its
// origin airport (the airport's code in the key header), and runs two
// consumer processes, itself re-executed, each owning half of
// the partitions (-assign static) or claiming them as a member of a dynamic
// assignment (-assign dynamic, see conductor); each folds its airports'
// states and reports them, with its counters, on its standard output. The
// parent merges the reports (an airport's state is the one furthest on,
// after a handoff) and verifies them as for the in-process run.

// flightsTopology is the stream of the run.
var flightsTopology = jetstream.Topology{Stream: "FLIGHTS", Prefix: "flights", Partitions: 8}

// consumerOwns are the partitions of each consumer process.
var consumerOwns = []string{"0,1,2,3", "4,5,6,7"}

// consumerEnv, set to the server's URL, makes the program a consumer
// process; ownEnv lists its partitions.
const (
	consumerEnv = "AGGFLOW_FLIGHTS_CONSUMER"
	ownEnv      = "AGGFLOW_FLIGHTS_OWN"
)

// publishWindow is how many flights are published before their
// acknowledgements are awaited.
const publishWindow = 2048

// flightSize is a flight's encoding: departure, delay, distance,
// destination, big-endian.
const flightSize = 8 + 4 + 4 + 2

func encodeFlight(f flightdata.Flight) []byte {
	b := make([]byte, 0, flightSize)
	b = binary.BigEndian.AppendUint64(b, uint64(f.Departure))
	b = binary.BigEndian.AppendUint32(b, uint32(f.Delay))
	b = binary.BigEndian.AppendUint32(b, uint32(f.Distance))
	return binary.BigEndian.AppendUint16(b, uint16(f.Destination))
}

// decodeFlight is the consumers' Codec.Decode: the origin airport is the key.
func decodeFlight(key string, msg natsjs.Msg) (job.Departure, error) {
	return decodeDeparture(key, msg.Data())
}

// decodeDeparture decodes what encodeFlight made, addressed to origin key.
func decodeDeparture(key string, b []byte) (job.Departure, error) {
	if len(b) != flightSize {
		return job.Departure{}, fmt.Errorf("%w: %d bytes, want %d", errFlightEncoding, len(b), flightSize)
	}
	return job.Departure{OriginCode: key, Flight: flightdata.Flight{
		Departure:   int64(binary.BigEndian.Uint64(b)),
		Delay:       int32(binary.BigEndian.Uint32(b[8:])),
		Distance:    int32(binary.BigEndian.Uint32(b[12:])),
		Destination: flightdata.Airport(binary.BigEndian.Uint16(b[16:])),
	}}, nil
}

// consumerReport is what a consumer process writes on its standard output.
type consumerReport struct {
	Member string `json:"member,omitempty"` // -assign dynamic's member name
	// States are the airports' states, each with the position of the last
	// flight applied to it: after a handoff the old owner's is behind.
	States    map[string]airportState `json:"states"`
	Exchanges job.Counts              `json:"exchanges"`
	Acks      int64                   `json:"acks"`
	// Partitions are those owned when the stop began.
	Partitions []int32 `json:"partitions"`
	// Applied counts the flights folded; Replayed those skipped, at or
	// below their airport's last position; Redelivered the deliveries of
	// Attempt 2 or more; Duplicates the redeliveries the consumer dropped
	// (Stats.Duplicates); Adopted the airport states taken over from
	// another member.
	Applied     int64           `json:"applied"`
	Replayed    int64           `json:"replayed"`
	Redelivered int64           `json:"redelivered"`
	Duplicates  int64           `json:"duplicates"`
	Adopted     int64           `json:"adopted"`
	QueueWait   job.Percentiles `json:"queue_wait"`
	Handling    job.Percentiles `json:"handling"`
	Error       string          `json:"error,omitempty"`
}

// replayJetStream is replay through JetStream: publish, then consume in two
// processes until each has handled its partitions to their end (static),
// or, under -assign dynamic, as the conductor leads the members: the first
// half of the flights published before they start, the second once the
// handoff is done, and the members stopped once every partition is
// acknowledged to its end. A first value on e.interrupt stops the
// consumers gracefully (SIGTERM), a second by force (SIGKILL). It returns
// once both processes exited and the server shut down.
func replayJetStream(cfg config, data *flightdata.Dataset, states []job.StateSlot, e job.Env) (job.Replayed, error) {
	srv, err := jstest.Start()
	if err != nil {
		return job.Replayed{}, err
	}
	defer srv.Shutdown()
	nc, js, err := jetstream.Connect(srv.URL())
	if err != nil {
		return job.Replayed{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	streamCfg, err := flightsTopology.StreamConfig()
	if err != nil {
		return job.Replayed{}, err
	}
	if _, err := js.CreateStream(ctx, streamCfg); err != nil {
		return job.Replayed{}, err
	}
	dynamic := cfg.assign == assignDynamic
	first := data.Flights
	if dynamic {
		first = data.Flights[:len(data.Flights)/2]
	}
	start := time.Now()
	if err := publishFlights(js, data, first); err != nil {
		return job.Replayed{}, err
	}
	broker := &brokerSummary{Partitions: flightsTopology.Partitions, Consumers: len(consumerOwns),
		Assignment: assignModes[cfg.assign], Publish: time.Since(start)}
	res := job.Replayed{Source: "jetstream", Broker: broker}

	start = time.Now()
	procs, goAhead, err := startConsumers(cfg, srv.URL(), e)
	if err != nil {
		return res, err
	}
	var cond *conductor
	if dynamic {
		cond = &conductor{js: js, data: data, flights: data.Flights[len(first):], procs: procs, goAhead: goAhead}
		condCtx, stopCond := context.WithCancel(context.Background())
		var conducting sync.WaitGroup
		conducting.Go(func() { cond.run(condCtx) })
		res.Signal, res.Forced = awaitConsumers(procs, e.Interrupt)
		stopCond()
		conducting.Wait()
	} else {
		res.Signal, res.Forced = awaitConsumers(procs, e.Interrupt)
	}
	res.Elapsed = time.Since(start)
	code := make(map[string]int, len(data.Airports))
	for i, c := range data.Airports {
		code[c] = i
	}
	positions := make([]int64, len(data.Airports)) // of the state kept: the furthest on
	var errs []error
	for _, p := range procs {
		r, err := p.report()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for c, st := range r.States {
			if i := code[c]; st.Position > positions[i] {
				states[i].State, positions[i] = st.State, st.Position
			}
		}
		res.Counts = plus(res.Counts, r.Exchanges)
		res.Replays += r.Replayed
		broker.Acks += r.Acks
		broker.Replayed += r.Replayed
		broker.Duplicates += r.Duplicates
		res.QueueWait, res.Handling = slowest(res.QueueWait, r.QueueWait), slowest(res.Handling, r.Handling)
		if r.Error != "" {
			errs = append(errs, errors.New(r.Error))
		}
		if dynamic {
			broker.Members = append(broker.Members, memberSummary{Name: r.Member, Partitions: r.Partitions,
				Claims: cond.view.claims[r.Member], Releases: cond.view.releases[r.Member], Applied: r.Applied,
				Adopted: r.Adopted, Replayed: r.Replayed, Redelivered: r.Redelivered, Duplicates: r.Duplicates})
		}
	}
	if dynamic {
		broker.LeaseTTL, broker.Handoff = cfg.leaseTTL, cond.handoff
		broker.Publish += cond.publish
		if cond.err != nil {
			errs = append(errs, cond.err)
		} else if !cond.finished && res.Signal == nil {
			errs = append(errs, fmt.Errorf("%w: the members stopped before every partition was acknowledged", errStalled))
		}
	}
	res.Err = errors.Join(errs...)
	res.SourceLine, res.Lines = broker.sourceLine(), broker.lines()
	return res, nil
}

// publishFlights publishes flights, of data, in order, a window at a time,
// and waits for the server's acknowledgement of each.
func publishFlights(js natsjs.JetStream, data *flightdata.Dataset, flights []flightdata.Flight) error {
	for i, f := range flights {
		if _, err := js.PublishMsgAsync(flightsTopology.NewMsg(data.Airports[f.Origin], encodeFlight(f))); err != nil {
			return fmt.Errorf("flights: publishing flight %d: %w", i, err)
		}
		if (i+1)%publishWindow == 0 || i == len(flights)-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return fmt.Errorf("flights: publishing: %d flights not acknowledged within a minute", js.PublishAsyncPending())
			}
		}
	}
	return nil
}

// consumerProc is a running consumer process.
type consumerProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	err    error // Wait's
}

// startConsumers starts the two consumer processes, the program
// re-executed with the dispatcher's flags: one per consumerOwns, or, under
// -assign dynamic, one per consumerMembers, the first starting at once,
// the second once goAhead is closed (its standard input).
func startConsumers(cfg config, url string, e job.Env) (procs []*consumerProc, goAhead io.Closer, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	stderr := &lockedWriter{w: e.Stderr} // the processes' error output, a line at a time from each
	kill := func() {
		for _, q := range procs {
			_ = q.cmd.Process.Kill()
			q.err = q.cmd.Wait()
		}
	}
	for i := range consumerOwns {
		p := &consumerProc{cmd: exec.Command(exe, "-parallelism", fmt.Sprint(cfg.Parallelism), "-pool", fmt.Sprint(cfg.Pool),
			"-max-pending", fmt.Sprint(cfg.MaxPending), "-handler-cost", cfg.HandlerCost.String())}
		share := ownEnv + "=" + consumerOwns[i]
		if cfg.assign == assignDynamic {
			share = memberEnv + "=" + consumerMembers[i]
			p.cmd.Args = append(p.cmd.Args, "-assign", "dynamic", "-lease-ttl", cfg.leaseTTL.String())
			if i > 0 { // the first one's standard input is empty: it starts at once
				if goAhead, err = p.cmd.StdinPipe(); err != nil {
					kill()
					return nil, nil, err
				}
			}
		}
		p.cmd.Env = append(os.Environ(), consumerEnv+"="+url, share)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, stderr
		if err := p.cmd.Start(); err != nil {
			kill()
			return nil, nil, err
		}
		procs = append(procs, p)
	}
	return procs, goAhead, nil
}

// awaitConsumers waits for the processes' exit: a first signal sends them
// SIGTERM (a graceful stop), a second SIGKILL. It returns the first signal
// and whether the stop was forced.
func awaitConsumers(procs []*consumerProc, interrupt <-chan os.Signal) (first os.Signal, forced bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range procs {
			p.err = p.cmd.Wait()
		}
	}()
	var firstAt time.Time
	for {
		select {
		case <-done:
			return first, forced
		case sig := <-interrupt:
			kill := syscall.SIGTERM
			switch {
			case first == nil:
				first, firstAt = sig, time.Now()
			case forced, sig == first && time.Since(firstAt) < job.RepeatWithin:
				continue
			default:
				forced, kill = true, syscall.SIGKILL
			}
			for _, p := range procs {
				_ = p.cmd.Process.Signal(kill)
			}
		}
	}
}

// report parses the process's report, once it exited.
func (p *consumerProc) report() (consumerReport, error) {
	var r consumerReport
	if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
		return r, errors.Join(fmt.Errorf("flights: consumer process %d: no report: %w", p.cmd.Process.Pid, err), p.err)
	}
	if p.err != nil {
		return r, fmt.Errorf("flights: consumer process %d: %w", p.cmd.Process.Pid, p.err)
	}
	return r, nil
}

// lockedWriter serialises the writes of several copying goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// plus adds two processes' counts.
func plus(c, d job.Counts) job.Counts {
	return job.Counts{Received: c.Received + d.Received, Succeeded: c.Succeeded + d.Succeeded, Failed: c.Failed + d.Failed,
		Discarded: c.Discarded + d.Discarded, InFlight: c.InFlight + d.InFlight}
}

// slowest keeps the larger of two processes' percentiles: without their
// histograms, the summary shows the worse of the two.
func slowest(a, b job.Percentiles) job.Percentiles {
	return job.Percentiles{P50: max(a.P50, b.P50), P99: max(a.P99, b.P99)}
}

// ownedPartitions parses ownEnv.
func ownedPartitions(s string) ([]int32, error) {
	var own []int32
	for _, f := range strings.Split(s, ",") {
		var p int32
		if _, err := fmt.Sscan(f, &p); err != nil {
			return nil, fmt.Errorf("flights: %s=%q: %w", ownEnv, s, err)
		}
		own = append(own, p)
	}
	return own, nil
}
