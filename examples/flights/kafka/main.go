// Command flights-kafka is the flights job scaled out on Kafka: it writes
// every flight of the input to a topic keyed by origin airport, two
// consumer processes of one group (this program re-executed) fold each
// airport's departures in order, and the coordinator checks the folded
// states against a sequential fold of the same input, as the in-process job
// does. By default the cluster is franz-go's kfake, in this process on a
// loopback port; -brokers names a real one.
//
// Usage:
//
//	go run ./examples/flights/kafka [-input FILE] [-brokers host:port,...] [-partitions 8] [-members 2]
//
// The coordinator waits until both members own partitions before it
// produces, so each airport's whole history is folded by one member; once
// the group committed the end of every partition it stops the members
// gracefully and merges their reports. The exit status is 0 only when
// nothing was lost, no ordering violation was seen and every airport's
// state was verified; 1 otherwise; 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// Exit statuses, as the in-process job's.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// sampleFile is the 20,000-flight sample of the in-process job, relative to
// the repository root.
const sampleFile = "examples/flights/data/flights-20k.json.gz"

func main() {
	if spec := os.Getenv(memberEnv); spec != "" {
		os.Exit(runMember(spec, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	input      string
	brokers    []string // none: kfake in this process
	partitions int
	members    int
	timeout    time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var brokers string
	fs := flag.NewFlagSet("flights-kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.input, "input", "", "`file` to replay: .json, .json.gz or .parquet (default: "+sampleFile+")")
	fs.StringVar(&brokers, "brokers", "", "seed brokers of a real cluster, `host:port,...` (default: kfake in this process)")
	fs.IntVar(&c.partitions, "partitions", 8, "`partitions` of the topic")
	fs.IntVar(&c.members, "members", 2, "consumer `processes`")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this `duration`")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		err := fmt.Errorf("flights-kafka: unexpected argument %q", fs.Arg(0))
		fmt.Fprintln(stderr, err)
		return c, err
	case c.partitions < 1 || c.members < 1 || c.timeout <= 0:
		err := errors.New("flights-kafka: -partitions, -members and -timeout must be positive")
		fmt.Fprintln(stderr, err)
		return c, err
	}
	if brokers != "" {
		c.brokers = strings.Split(brokers, ",")
	}
	if c.input == "" {
		c.input = findSample()
	}
	return c, nil
}

// findSample returns the sample's path from the working directory, or
// from this source file's directory when run elsewhere with go run.
func findSample() string {
	if _, err := os.Stat(sampleFile); err == nil {
		return sampleFile
	}
	if _, src, _, ok := runtime.Caller(0); ok {
		return filepath.Join(filepath.Dir(src), "..", "data", filepath.Base(sampleFile))
	}
	return sampleFile
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	} else if err != nil {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	start := time.Now()
	data, err := load(ctx, cfg.input)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	s := summary{Input: cfg.input, Rows: int64(len(data.Flights)), Airports: data.Origins(),
		Partitions: cfg.partitions, Decode: time.Since(start)}
	res, err := scaleOut(ctx, cfg, data, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "flights-kafka:", err)
		return exitFailed
	}
	s.check(data, res)
	s.write(stdout)
	return s.exitCode()
}

func load(ctx context.Context, path string) (*flightdata.Dataset, error) {
	in, err := flightdata.Open(path)
	if err != nil {
		return nil, fmt.Errorf("flights-kafka: %w (run from the repository root, or give -input)", err)
	}
	defer in.Close()
	return in.Decode(ctx, flightdata.Options{})
}

// runName names the run's topic and group, unique on a shared cluster.
func runName() string { return "flights-" + strconv.FormatInt(time.Now().UnixNano(), 36) }
