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
//	go run ./examples/flights [-input FILE.json|FILE.json.gz|FILE.parquet] [-strict] [-source flux|rxgo] [-parallelism N] [-pool N] [-max-pending N] [-handler-cost 2us] [-progress auto|always|never] [-metrics HOST:PORT [-metrics-hold 1m]] [-json]
//
// Without -input it replays a 20,000-flight sample embedded in the binary;
// examples/flights/data/flights-3m.parquet holds 3 million. -source rxgo
// feeds the dispatcher through an rxgo Observable and counts the outcomes
// read back as one, checked against the dispatcher's Stats. -metrics serves
// the dispatcher's Prometheus metrics (observe/prommetrics) on
// http://HOST:PORT/metrics during the run, and -metrics-hold that long after
// the summary. SIGINT (Ctrl-C) or SIGTERM drains the dispatcher and prints a
// summary marked PARTIAL (no verification), exiting 130 or 143 (128 + the
// signal's number); a second signal stops it by force. The exit status is 0
// only when nothing was lost, no ordering violation was seen and the state
// was verified; 1 for bad input or a failed check; 2 for a bad command line.
//
// The same job scaled out is a module of its own, so that this one builds
// no broker: go run ./examples/flights/jetstream (an embedded NATS
// JetStream server and two consumer processes) and go run
// ./examples/flights/kafka.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

func main() {
	os.Exit(runProcess(nil))
}

// runProcess runs the program on the process's arguments, standard streams
// and signals, and returns its exit status; handled is env.handled.
func runProcess(handled func()) int {
	e, stop := job.ProcessEnv()
	defer stop()
	return run(os.Args[1:], env{Env: e, handled: handled})
}

// env is what the program talks to.
type env struct {
	job.Env
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
	cfg, err := parseFlags(args, e.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return job.ExitOK // -help asked for the usage: not a failure
	} else if err != nil {
		return job.ExitUsage
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
		fmt.Fprintln(e.Stderr, err)
		return job.ExitFailed
	}
	fmt.Fprintf(e.Stderr, "flights: serving metrics on http://%s/metrics\n", metrics.addr)
	if e.serving != nil {
		e.serving(metrics.addr)
	}
	status, complete := execute(cfg, e, metrics)
	if complete && cfg.metricsHold > 0 {
		fmt.Fprintf(e.Stderr, "flights: serving metrics for %v more; SIGINT or SIGTERM ends the hold\n", cfg.metricsHold)
		if sig := hold(cfg.metricsHold, e.Interrupt); sig != nil {
			fmt.Fprintf(e.Stderr, "flights: %s ended the hold\n", job.SignalName(sig))
		}
	}
	if err := metrics.close(); err != nil {
		fmt.Fprintln(e.Stderr, err)
		if status == job.ExitOK {
			status = job.ExitFailed
		}
	}
	return status
}

// execute runs the job (see job.Execute) with the in-process replay;
// metrics, when not nil, observes the dispatcher.
func execute(cfg config, e env, metrics *metricsServer) (status int, complete bool) {
	return job.Execute(cfg.Config, e.Env, func(data *flightdata.Dataset, states []job.StateSlot) (job.Replayed, error) {
		return replay(cfg, data, states, e, metrics)
	})
}
