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
//	go run ./examples/flights [-input FILE.json|FILE.json.gz|FILE.parquet] [-strict] [-parallelism N] [-pool N] [-max-pending N] [-handler-cost 2us] [-progress auto|always|never] [-json]
//
// Without -input it replays a 20,000-flight sample embedded in the binary;
// examples/flights/data/flights-3m.parquet holds 3 million. SIGINT (Ctrl-C)
// or SIGTERM drains the dispatcher and prints a summary marked PARTIAL (no
// verification), exiting 130 or 143 (128 + the signal's number); a second
// signal stops it by force. The exit status is 0 only when nothing was lost,
// no ordering violation was seen and the state was verified; 1 for bad input
// or a failed check; 2 for a bad command line.
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

func main() { os.Exit(runProcess(nil)) }

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
}

// run is the program with its surroundings made explicit; it returns the exit
// status.
func run(args []string, e env) int {
	stdout, stderr := e.stdout, e.stderr
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK // -help asked for the usage: not a failure
	} else if err != nil {
		return exitUsage
	}
	start := time.Now()
	data, err := decode(cfg, e)
	if stop := (*signalled)(nil); errors.As(err, &stop) {
		fmt.Fprintf(stderr, "%v while decoding; nothing was dispatched\n", stop)
		return signalStatus(stop.sig)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	s := summary{
		Input: cfg.input, Rows: int64(len(data.Flights)),
		Airports: data.Origins(), AirportsNamed: len(data.Airports),
		Parallelism: cfg.parallelism, Pool: cfg.pool, HandlerCost: cfg.handlerCost,
		Decode: time.Since(start),
	}
	if s.Input == "" {
		s.Input = sampleName
	}

	states := make([]stateSlot, len(data.Airports))
	res, err := replay(cfg, data, states, e)
	if err != nil {
		fmt.Fprintln(stderr, "flights:", err)
		return exitFailed
	}
	s.stoppedBy(res.signal, res.forced)
	s.account(res.counts, res.elapsed)
	if res.err != nil {
		s.Error = res.err.Error()
	}
	s.QueueWait = percentiles{P50: res.latency.queueWait.Quantile(0.50), P99: res.latency.queueWait.Quantile(0.99)}
	s.Handling = percentiles{P50: res.latency.handling.Quantile(0.50), P99: res.latency.handling.Quantile(0.99)}
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
		return exitFailed
	}
	return s.exitCode()
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
