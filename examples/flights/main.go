// Command flights replays real US flight records through an aggflow
// dispatcher: each origin airport is an aggregate (named aggregate
// "flights.Airport", id = IATA code), each flight an exchange, in file order.
// The handler folds each airport's departures into an order-sensitive state;
// at the end the program prints throughput, latency percentiles, the
// accounting of every exchange and the busiest airports, then folds the same
// input sequentially and checks that every airport's state is identical.
//
// Usage:
//
//	go run ./examples/flights [-input FILE.json|FILE.json.gz|FILE.parquet] [-strict] [-source flux|rxgo|jetstream [-assign static|dynamic]] [-parallelism N] [-pool N] [-max-pending N] [-handler-cost 2us] [-progress auto|always|never] [-metrics HOST:PORT [-metrics-hold 1m]] [-json]
//
// Without -input it replays a 20,000-flight sample embedded in the binary;
// examples/flights/data/flights-3m.parquet holds 3 million. -source
// jetstream publishes the flights to an embedded NATS JetStream server,
// keyed by origin airport on 8 partitions, and consumes them in two
// consumer processes (the program re-executed), 4 partitions each, whose
// airport states are merged and verified the same way; with -assign
// dynamic the two are members a and b of a dynamic assignment (leases in a
// KV bucket): a claims all 8 partitions and folds the first half of the
// flights, b joins and takes 4 by a graceful handoff, each airport's state
// following its partition, and the second half is published then. -source rxgo
// feeds the dispatcher through an rxgo Observable and counts the outcomes
// read back as one, checked against the dispatcher's Stats. -metrics serves
// the dispatcher's Prometheus metrics (observe/prommetrics) on
// http://HOST:PORT/metrics during the run, and -metrics-hold that long after
// the summary. SIGINT (Ctrl-C) or SIGTERM drains the dispatcher and prints a
// summary marked PARTIAL (no verification), exiting 130 or 143 (128 + the
// signal's number); a second signal stops it by force. The exit status is 0
// only when nothing was lost, no ordering violation was seen and the state
// was verified; 1 for bad input or a failed check; 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// busiestShown is the length of the busiest-airports table.
const busiestShown = 10

// decodeBarWorth is the input size, in bytes as stored, from which a
// decoding progress bar is drawn under -progress auto.
const decodeBarWorth = 4 << 20

func main() {
	if url := os.Getenv(consumerEnv); url != "" { // a consumer process of -source jetstream
		os.Exit(consumerMain(url, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(runProcess(nil))
}

// runProcess runs the program on the process's arguments, standard streams
// and signals, and returns its exit status; handled is env.handled.
func runProcess(handled func()) int {
	interrupt := make(chan os.Signal, 2)
	signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupt)
	return run(os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, interrupt: interrupt, handled: handled})
}

// env is what the program talks to.
type env struct {
	stdout, stderr io.Writer
	// interrupt delivers one value per SIGINT or SIGTERM.
	interrupt <-chan os.Signal
	// handled, when set, is called after each exchange handled, from the
	// scheduler's goroutines, so that a test can interrupt a replay in
	// progress.
	handled func()
	// serving, when set, is called with the address (host:port) the
	// -metrics server listens on, once it does.
	serving func(addr string)
}

// run is the program with its surroundings made explicit; it returns the exit
// status.
func run(args []string, e env) int {
	cfg, err := parseFlags(args, e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK // -help asked for the usage: not a failure
	} else if err != nil {
		return exitUsage
	}
	if cfg.metrics != "" {
		return runServingMetrics(cfg, e)
	}
	status, _ := execute(cfg, e, nil)
	return status
}

// runServingMetrics is run under -metrics: the server listens before the
// input is decoded, serves during the replay and, after the summary of a
// run no signal stopped, for cfg.metricsHold more unless a signal ends the
// hold (the exit status stays the run's); then it is shut down. A failed
// shutdown fails a run that had succeeded.
func runServingMetrics(cfg config, e env) int {
	metrics, err := serveMetrics(cfg.metrics)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return exitFailed
	}
	fmt.Fprintf(e.stderr, "flights: serving metrics on http://%s/metrics\n", metrics.addr)
	if e.serving != nil {
		e.serving(metrics.addr)
	}
	status, complete := execute(cfg, e, metrics)
	if complete && cfg.metricsHold > 0 {
		fmt.Fprintf(e.stderr, "flights: serving metrics for %v more; SIGINT or SIGTERM ends the hold\n", cfg.metricsHold)
		if sig := hold(cfg.metricsHold, e.interrupt); sig != nil {
			fmt.Fprintf(e.stderr, "flights: %s ended the hold\n", signalName(sig))
		}
	}
	if err := metrics.close(); err != nil {
		fmt.Fprintln(e.stderr, err)
		if status == exitOK {
			status = exitFailed
		}
	}
	return status
}

// execute decodes, replays, verifies and prints the summary; it returns the
// exit status and whether the summary of a complete run (no signal stopped
// it) was written.
func execute(cfg config, e env, metrics *metricsServer) (status int, complete bool) {
	stdout, stderr := e.stdout, e.stderr
	start := time.Now()
	data, err := decode(cfg, e)
	if stop := (*signalled)(nil); errors.As(err, &stop) {
		fmt.Fprintf(stderr, "%v while decoding; nothing was dispatched\n", stop)
		return signalStatus(stop.sig), false
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed, false
	}
	s := summary{
		Input: cfg.input, Source: sourceKinds[cfg.source], Rows: int64(len(data.Flights)),
		Airports: data.Origins(), AirportsNamed: len(data.Airports),
		Parallelism: cfg.parallelism, Pool: cfg.pool, HandlerCost: cfg.handlerCost,
		Decode: time.Since(start),
	}
	if s.Input == "" {
		s.Input = sampleName
	}

	states := make([]stateSlot, len(data.Airports))
	play := replay
	if cfg.source == sourceJetstream {
		play = func(cfg config, data *flightdata.Dataset, states []stateSlot, e env, _ *metricsServer) (replayed, error) {
			return replayJetStream(cfg, data, states, e)
		}
	}
	res, err := play(cfg, data, states, e, metrics)
	if err != nil {
		fmt.Fprintln(stderr, "flights:", err)
		return exitFailed, false
	}
	s.stoppedBy(res.signal, res.forced)
	s.account(res.counts, res.replays, res.elapsed)
	s.readBack(res.readBack, res.err)
	if res.err != nil {
		s.Error = res.err.Error()
	}
	s.QueueWait, s.Handling = res.percentiles()
	s.Broker = res.broker
	state := func(i int) airport.State { return states[i].State }
	s.tally(data, state, busiestShown)

	s.Verification = skipped
	if !s.Partial {
		start := time.Now()
		s.Difference = airport.Diff(data.Airports, airport.Fold(data), state)
		s.Verify = time.Since(start)
		s.Verification = verified
		if s.Difference != "" {
			s.Verification = notVerified
		}
	}

	write := s.writeText
	if cfg.json {
		write = s.writeJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintln(stderr, "flights:", err)
		return exitFailed, false
	}
	return s.exitCode(), !s.Partial
}

// decode reads the input named by cfg, or the embedded sample, drawing a
// progress bar on e.stderr as cfg.progress says. A signal on e.interrupt
// during decoding cancels it and gives a *signalled error, even if decoding
// had just finished: the signal is not lost.
func decode(cfg config, e env) (*flightdata.Dataset, error) {
	in, err := openInput(cfg)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	decoded := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case sig := <-e.interrupt:
			cancel(&signalled{sig})
		case <-decoded:
			select { // one that came as decoding ended still counts
			case sig := <-e.interrupt:
				cancel(&signalled{sig})
			default:
			}
		}
	})
	var read atomic.Int64
	stopBar := startProgress(e.stderr, cfg.progress,
		bar{description: "decoding", total: in.Size(), worth: decodeBarWorth, unit: "bytes"}, read.Load)
	data, err := in.Decode(ctx, flightdata.Options{Strict: cfg.strict, Progress: &read})
	stopBar(err == nil)
	close(decoded)
	watcher.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return nil, cause
	}
	return data, err
}
