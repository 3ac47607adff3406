// Command streaming runs the streaming benchmark suite: every
// (implementation, cell, repetition) in a process of its own, repetitions
// interleaved, then writes a Markdown report, charts and the raw results.
//
// From the repository root:
//
//	go -C bench run ./cmd/streaming -out ../docs/bench
//
// The default grid is the headline cells (128 groups; ids 1, 16, 1024,
// 100000, 1000000 with the no-op handler; 1024 ids with spin1us and
// sleep50us). -grid full runs all 45 cells; -keys, -groups and -handlers
// give a cross product of their own; -cells lists cells by name
// ("noop/k1024/p128,...").
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aggflow/aggflow/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "streaming:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		child    = flag.String("child", "", "internal: run the JSON-encoded run in this process and print its result")
		out      = flag.String("out", "", "directory for streaming.md, the charts and results.json (none: the report goes to stdout)")
		grid     = flag.String("grid", "headline", "headline or full")
		cellsF   = flag.String("cells", "", "comma-separated cells handler/kK/pP; overrides -grid")
		keysF    = flag.String("keys", "", "id counts of a cross product (with -groups and -handlers; overrides -grid)")
		groupsF  = flag.String("groups", "", "group counts of a cross product (default 128)")
		handlF   = flag.String("handlers", "", "handlers of a cross product (default noop): noop, spin1us, sleep50us, gosleep50us")
		implsF   = flag.String("impls", "inline,spsc,sharded,rxgo,aggflow,reactor", "implementations, in run order")
		n        = flag.Int("n", 1_000_000, "exchanges per run")
		nBlock   = flag.Int("n-blocking", 100_000, "exchanges per run with a blocking handler (0: -n)")
		reps     = flag.Int("reps", 3, "repetitions of each run, interleaved across implementations")
		verify   = flag.Bool("verify", false, "check per-id order and count inside every run (slows the handler)")
		loadsF   = flag.String("loads", "0.5,0.9", "latency runs at these fractions of aggflow's saturation rate (empty: none)")
		latSec   = flag.Float64("latency-seconds", 1, "length of a latency run, in seconds of offered load (capped at -n)")
		reactorF = flag.String("reactor-dir", "", "directory of ReactorBench.java (default: ../shared/baselines/reactor from the repository root)")
		warmups  = flag.Int("reactor-warmups", bench.DefaultWarmUp.Min, "ReactorBench passes at least before the timed ones")
		maxWarm  = flag.Int("reactor-max-warmups", bench.DefaultWarmUp.Max, "ReactorBench passes at most before the timed ones, until two consecutive passes agree within 5%")
		timeout  = flag.Duration("timeout", 20*time.Minute, "limit of one run")
		note     = flag.String("note", "", "a sentence for the report's header (the state of the machine)")
	)
	flag.Parse()
	if *child != "" {
		var spec bench.ChildSpec
		if err := json.Unmarshal([]byte(*child), &spec); err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(bench.RunChild(spec))
	}

	cells, err := chooseCells(*grid, *cellsF, *keysF, *groupsF, *handlF)
	if err != nil {
		return err
	}
	var loads []float64
	if *loadsF != "" {
		for _, f := range strings.Split(*loadsF, ",") {
			var l float64
			if _, err := fmt.Sscan(f, &l); err != nil || l <= 0 {
				return fmt.Errorf("-loads: %q is not a list of positive fractions", *loadsF)
			}
			loads = append(loads, l)
		}
	}
	impls := strings.Split(*implsF, ",")
	for _, im := range impls {
		if _, ok := bench.LookupImpl(im); !ok && im != "reactor" {
			return fmt.Errorf("-impls: unknown implementation %q", im)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	s := &bench.Suite{
		Cells: cells, Impls: impls, N: *n, NBlocking: *nBlock, Reps: *reps, Verify: *verify,
		Loads: loads, LatencySeconds: *latSec, Child: bench.ChildCommand(exe),
		ChildTimeout: *timeout, Log: os.Stderr,
	}
	if slicesContains(impls, "reactor") {
		dirs := bench.ReactorDirs
		if *reactorF != "" {
			dirs = []string{*reactorF}
		}
		rb := &bench.Reactor{WarmUp: bench.WarmUp{Min: *warmups, Max: *maxWarm}}
		dir, ok := bench.FindReactorDir(dirs...)
		rb.Dir = dir
		switch {
		case !ok:
			fmt.Fprintf(os.Stderr, "reactor: skipped: no ReactorBench.java in %v\n", dirs)
		default:
			if err := rb.Compile(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "reactor: skipped: %v\n", err)
			} else {
				defer rb.Close()
				s.Reactor = rb
			}
		}
	}

	results, err := s.Run(ctx)
	if err != nil {
		return err
	}
	meta := bench.Meta{
		Date: time.Now().UTC().Format("2006-01-02"), GoVersion: runtime.Version(), CPU: cpuModel(),
		Command: shellLine(append([]string{"go", "-C", "bench", "run", "./cmd/streaming"}, os.Args[1:]...)), GOMAXPROCS: runtime.GOMAXPROCS(0),
		N: *n, NBlocking: *nBlock, Reps: *reps, Note: *note,
	}
	if meta.NBlocking == 0 {
		meta.NBlocking = *n
	}
	if *out == "" {
		if err := bench.WriteMarkdown(os.Stdout, meta, results, nil); err != nil {
			return err
		}
		return bench.Failures(results)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	charts, err := bench.WriteCharts(*out, results)
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(results, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "results.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(*out, "streaming.md"))
	if err != nil {
		return err
	}
	err = bench.WriteMarkdown(f, meta, results, charts)
	err = errors.Join(err, f.Close())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(*out, "streaming.md"))
	return bench.Failures(results)
}

func chooseCells(grid, cells, keys, groups, handlers string) ([]bench.Cell, error) {
	if cells != "" {
		var v []bench.Cell
		for _, f := range strings.Split(cells, ",") {
			c, err := bench.ParseCell(strings.TrimSpace(f))
			if err != nil {
				return nil, err
			}
			v = append(v, c)
		}
		return v, nil
	}
	if keys != "" || groups != "" || handlers != "" {
		ks, ps, hs := bench.GridKeys, []int{128}, []bench.Handler{bench.Noop}
		var err error
		if keys != "" {
			if ks, err = bench.ParseInts(keys); err != nil {
				return nil, err
			}
		}
		if groups != "" {
			if ps, err = bench.ParseInts(groups); err != nil {
				return nil, err
			}
		}
		if handlers != "" {
			if hs, err = bench.ParseHandlers(handlers); err != nil {
				return nil, err
			}
		}
		return bench.CrossCells(hs, ps, ks), nil
	}
	switch grid {
	case "headline":
		return bench.HeadlineCells(), nil
	case "full":
		return bench.CrossCells(bench.GridHandlers, bench.GridGroups, bench.GridKeys), nil
	}
	return nil, fmt.Errorf("-grid: %q is neither headline nor full", grid)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// shellLine joins args into a line a POSIX shell reads back as args.
func shellLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

func slicesContains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}
