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

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// -source jetstream: the flights go through NATS JetStream. The program
// starts an embedded server, publishes every flight in file order on the
// partition of its origin airport (the airport's code in the key header),
// and runs two consumer processes, itself re-executed, each owning half of
// the partitions; each folds its airports' states and reports them, with
// its counters, on its standard output. The parent merges the reports and
// verifies them as for the in-process run.

// flightsTopology is the stream of the -source jetstream run.
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
func decodeFlight(key string, msg natsjs.Msg) (departure, error) {
	return decodeDeparture(key, msg.Data())
}

// decodeDeparture decodes what encodeFlight made, addressed to origin key.
func decodeDeparture(key string, b []byte) (departure, error) {
	if len(b) != flightSize {
		return departure{}, fmt.Errorf("%w: %d bytes, want %d", errFlightEncoding, len(b), flightSize)
	}
	return departure{origin: key, Flight: flightdata.Flight{
		Departure:   int64(binary.BigEndian.Uint64(b)),
		Delay:       int32(binary.BigEndian.Uint32(b[8:])),
		Distance:    int32(binary.BigEndian.Uint32(b[12:])),
		Destination: flightdata.Airport(binary.BigEndian.Uint16(b[16:])),
	}}, nil
}

// consumerReport is what a consumer process writes on its standard output.
type consumerReport struct {
	States    map[string]airport.State `json:"states"`
	Exchanges counts                   `json:"exchanges"`
	Acks      int64                    `json:"acks"`
	QueueWait percentiles              `json:"queue_wait"`
	Handling  percentiles              `json:"handling"`
	Error     string                   `json:"error,omitempty"`
}

// brokerSummary is what the summary says of a -source jetstream run.
type brokerSummary struct {
	Partitions int           `json:"partitions"`
	Consumers  int           `json:"consumer_processes"`
	Publish    time.Duration `json:"publish_ns"`
	Acks       int64         `json:"acks"`
}

// replayJetStream is replay through JetStream: publish, then consume in two
// processes until each has handled its partitions to their end. A first
// value on e.interrupt stops the consumers gracefully (SIGTERM), a second by
// force (SIGKILL). It returns once both processes exited and the server
// shut down.
func replayJetStream(cfg config, data *flightdata.Dataset, states []stateSlot, e env) (replayed, error) {
	srv, err := jstest.Start()
	if err != nil {
		return replayed{}, err
	}
	defer srv.Shutdown()
	nc, js, err := jetstream.Connect(srv.URL())
	if err != nil {
		return replayed{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	streamCfg, err := flightsTopology.StreamConfig()
	if err != nil {
		return replayed{}, err
	}
	if _, err := js.CreateStream(ctx, streamCfg); err != nil {
		return replayed{}, err
	}
	start := time.Now()
	if err := publishFlights(js, data); err != nil {
		return replayed{}, err
	}
	res := replayed{broker: &brokerSummary{Partitions: flightsTopology.Partitions, Consumers: len(consumerOwns), Publish: time.Since(start)}}

	start = time.Now()
	procs, err := startConsumers(cfg, srv.URL(), e)
	if err != nil {
		return res, err
	}
	res.signal, res.forced = awaitConsumers(procs, e.interrupt)
	res.elapsed = time.Since(start)
	code := make(map[string]int, len(data.Airports))
	for i, c := range data.Airports {
		code[c] = i
	}
	var errs []error
	for _, p := range procs {
		r, err := p.report()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for c, st := range r.States {
			states[code[c]].State = st
		}
		res.counts = res.counts.plus(r.Exchanges)
		res.broker.Acks += r.Acks
		res.queueWait, res.handling = slowest(res.queueWait, r.QueueWait), slowest(res.handling, r.Handling)
		if r.Error != "" {
			errs = append(errs, errors.New(r.Error))
		}
	}
	res.err = errors.Join(errs...)
	return res, nil
}

// publishFlights publishes every flight of data in file order, a window at
// a time, and waits for the server's acknowledgement of each.
func publishFlights(js natsjs.JetStream, data *flightdata.Dataset) error {
	for i, f := range data.Flights {
		if _, err := js.PublishMsgAsync(flightsTopology.NewMsg(data.Airports[f.Origin], encodeFlight(f))); err != nil {
			return fmt.Errorf("flights: publishing flight %d: %w", i, err)
		}
		if (i+1)%publishWindow == 0 || i == len(data.Flights)-1 {
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

// startConsumers starts one consumer process per consumerOwns, the
// program re-executed with the dispatcher's flags.
func startConsumers(cfg config, url string, e env) ([]*consumerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	stderr := &lockedWriter{w: e.stderr} // the processes' error output, a line at a time from each
	var procs []*consumerProc
	for _, own := range consumerOwns {
		p := &consumerProc{cmd: exec.Command(exe, "-parallelism", fmt.Sprint(cfg.parallelism), "-pool", fmt.Sprint(cfg.pool),
			"-max-pending", fmt.Sprint(cfg.maxPending), "-handler-cost", cfg.handlerCost.String())}
		p.cmd.Env = append(os.Environ(), consumerEnv+"="+url, ownEnv+"="+own)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, stderr
		if err := p.cmd.Start(); err != nil {
			for _, q := range procs {
				_ = q.cmd.Process.Kill()
				q.err = q.cmd.Wait()
			}
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
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
			case forced, sig == first && time.Since(firstAt) < repeatWithin:
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
func (c counts) plus(d counts) counts {
	return counts{Received: c.Received + d.Received, Succeeded: c.Succeeded + d.Succeeded, Failed: c.Failed + d.Failed,
		Discarded: c.Discarded + d.Discarded, InFlight: c.InFlight + d.InFlight}
}

// slowest keeps the larger of two processes' percentiles: without their
// histograms, the summary shows the worse of the two.
func slowest(a, b percentiles) percentiles {
	return percentiles{P50: max(a.P50, b.P50), P99: max(a.P99, b.P99)}
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
