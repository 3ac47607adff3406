package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// config is the command line.
type config struct {
	input       string        // "" for the embedded sample
	parallelism int           // dispatcher groups
	pool        int           // scheduler goroutines
	maxPending  int           // the dispatcher's pending budget, in exchanges
	handlerCost time.Duration // CPU burnt per exchange
	json        bool          // summary as JSON
	strict      bool          // an unknown JSON field fails the run
	progress    progressMode  // when to draw progress bars
	source      sourceKind    // how the flights reach the dispatcher
	assign      assignMode    // -source jetstream: how the consumer processes share the partitions
	metrics     string        // host:port to serve /metrics on; "" for none
	metricsHold time.Duration // how long /metrics stays served after the summary
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("flights", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flights [flags]

Replays US flight records through an aggflow dispatcher, one aggregate per
origin airport, then checks the per-airport state against a sequential fold.
SIGINT (Ctrl-C) or SIGTERM drains the dispatcher and exits 130 or 143; a
second signal stops it by force.`)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.input, "input", "", "`file` to replay: .json, .json.gz or .parquet (default: the embedded 20,000-flight sample)")
	fs.IntVar(&c.parallelism, "parallelism", aggregate.DefaultParallelism, "dispatcher `groups`")
	fs.IntVar(&c.pool, "pool", schedulers.DefaultPoolSize, "scheduler `goroutines`")
	fs.IntVar(&c.maxPending, "max-pending", dispatch.DefaultMaxPending, "the dispatcher's pending budget, in `exchanges` admitted and not finished")
	fs.DurationVar(&c.handlerCost, "handler-cost", 0, "CPU time burnt per exchange, e.g. 2us")
	fs.BoolVar(&c.json, "json", false, "print the summary as JSON")
	fs.BoolVar(&c.strict, "strict", false, "fail on a JSON record with a field other than date, delay, distance, origin and destination (by default such fields are skipped)")
	fs.Var(choice[progressMode]{&c.progress, progressModes}, "progress", "progress bars on stderr while decoding and dispatching, a `mode`: auto (when stderr is a terminal and the input large), always or never")
	fs.Var(choice[sourceKind]{&c.source, sourceKinds}, "source", "how the flights reach the dispatcher, a `kind`: flux (flux.FromSeq), rxgo (an rxgo.Observable through flux.FromObservable, the outcomes read back as an rxgo.Observable and checked against the dispatcher's Stats) or jetstream (published to an embedded NATS JetStream server of 8 partitions, consumed by two consumer processes, this program re-executed)")
	fs.Var(choice[assignMode]{&c.assign, assignModes}, "assign", "with -source jetstream, how the two consumer processes share the partitions, a `mode`: static (4 each, told) or dynamic (members a and b claim them through leases of "+leaseTTL.String()+"; b joins once a holds all 8 and takes its half by a graceful handoff, the airports' states following their partitions)")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on http://`host:port`/metrics during the run (port 0 picks one; the address is printed on stderr)")
	fs.DurationVar(&c.metricsHold, "metrics-hold", 0, "with -metrics, keep serving for this `duration` after the summary; SIGINT or SIGTERM ends the hold early")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return c, err
	} else if err != nil {
		return c, errUsage
	}
	assignSet := false
	fs.Visit(func(f *flag.Flag) { assignSet = assignSet || f.Name == "assign" })
	var problem string
	switch {
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case c.parallelism < 1:
		problem = "-parallelism must be at least 1"
	case c.pool < 1:
		problem = "-pool must be at least 1"
	case c.maxPending < 1:
		problem = "-max-pending must be at least 1"
	case c.handlerCost < 0:
		problem = "-handler-cost must not be negative"
	case c.metricsHold < 0:
		problem = "-metrics-hold must not be negative"
	case c.metricsHold > 0 && c.metrics == "":
		problem = "-metrics-hold needs -metrics"
	case assignSet && c.source != sourceJetstream:
		problem = "-assign shares the partitions of -source jetstream: not with -source " + sourceKinds[c.source]
	case c.source == sourceJetstream && c.metrics != "":
		problem = "-metrics serves one process's dispatcher: not with -source jetstream"
	default:
		return c, nil
	}
	fmt.Fprintln(stderr, "flights:", problem)
	fs.Usage()
	return c, errUsage
}
