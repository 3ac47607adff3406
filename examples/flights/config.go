package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
)

// config is the command line.
type config struct {
	input       string        // "" for the embedded sample
	parallelism int           // dispatcher groups
	pool        int           // scheduler goroutines
	handlerCost time.Duration // CPU burnt per exchange
	json        bool          // summary as JSON
}

// errUsage reports a command line that cannot run; flag has already printed
// the details.
var errUsage = errors.New("flights: usage")

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("flights", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flights [flags]

Replays US flight records through an aggflow dispatcher, one aggregate per
origin airport, then checks the per-airport state against a sequential fold.`)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.input, "input", "", "`file` to replay, .json or .parquet (default: the embedded 20,000-flight sample)")
	fs.IntVar(&c.parallelism, "parallelism", aggregate.DefaultParallelism, "dispatcher `groups`")
	fs.IntVar(&c.pool, "pool", schedulers.DefaultPoolSize, "scheduler `goroutines`")
	fs.DurationVar(&c.handlerCost, "handler-cost", 0, "CPU time burnt per exchange, e.g. 2us")
	fs.BoolVar(&c.json, "json", false, "print the summary as JSON")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return c, err
	} else if err != nil {
		return c, errUsage
	}
	var problem string
	switch {
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case c.parallelism < 1:
		problem = "-parallelism must be at least 1"
	case c.pool < 1:
		problem = "-pool must be at least 1"
	case c.handlerCost < 0:
		problem = "-handler-cost must not be negative"
	default:
		return c, nil
	}
	fmt.Fprintln(stderr, "flights:", problem)
	fs.Usage()
	return c, errUsage
}
