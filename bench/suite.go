package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"time"
)

// ChildSpec is one run of an in-process implementation in a process of its
// own (so that its peak RSS is its own).
type ChildSpec struct {
	Impl   string  `json:"impl"`
	Cell   Cell    `json:"cell"`
	N      int     `json:"n"`
	Warmup int     `json:"warmup"` // exchanges of an untimed pass first
	Verify bool    `json:"verify"`
	Rate   float64 `json:"rate,omitempty"`
	Load   float64 `json:"load,omitempty"`
	Rep    int     `json:"rep"`
}

// RunChild builds the workload, runs the warm-up pass and the measured one,
// and adds the process's peak RSS. It is what a child process does.
func RunChild(spec ChildSpec) Result {
	im, ok := LookupImpl(spec.Impl)
	if !ok {
		return Result{Impl: spec.Impl, Cell: spec.Cell, N: spec.N, Rep: spec.Rep, Err: "bench: no implementation " + spec.Impl}
	}
	w := NewWorkload(spec.Cell.K, spec.N)
	if spec.Warmup > 0 {
		if res := Measure(im, spec.Cell, w, min(spec.Warmup, spec.N), RunOptions{Verify: spec.Verify}); res.Err != "" {
			res.Err = "warm-up: " + res.Err
			res.Rep = spec.Rep
			return res
		}
	}
	res := Measure(im, spec.Cell, w, spec.N, RunOptions{Verify: spec.Verify, Rate: spec.Rate})
	res.RSSKB, res.Rep, res.Load = PeakRSSKB(), spec.Rep, spec.Load
	return res
}

// LatencyImpls are the implementations given latency runs, in run order,
// when the suite runs them.
var LatencyImpls = []string{"sharded", "aggflow", "reactor"}

// Suite runs a grid of cells over implementations, each run in its own
// process, repetitions interleaved: for each cell, A B C ... A B C ..., then
// the latency runs of LatencyImpls, interleaved the same way.
type Suite struct {
	Cells []Cell
	Impls []string // names; "reactor" runs ReactorBench
	N     int      // exchanges per run
	// NBlocking, when positive, replaces N for the blocking handlers, whose
	// exchanges cost 60-120 µs each on 2 threads.
	NBlocking int
	Reps      int
	Verify    bool
	// Loads are the fractions of aggflow's measured saturation rate (in the
	// same cell, this run) at which LatencyImpls get a paced producer, the
	// same rate for each, and their waits are recorded; none: no latency
	// runs.
	Loads []float64
	// LatencySeconds bounds a latency run: it offers at most rate x
	// LatencySeconds exchanges (and at most N, at least 1,000).
	LatencySeconds float64
	Reactor        *Reactor // nil: no Reactor runs
	// Child starts the process that runs spec and prints its Result as one
	// JSON line; see ChildCommand.
	Child        func(ctx context.Context, spec ChildSpec) *exec.Cmd
	ChildTimeout time.Duration
	Log          io.Writer // one line per run
}

// ChildCommand returns a Child that runs exe with the flags args, -child and
// the spec.
func ChildCommand(exe string, args ...string) func(ctx context.Context, spec ChildSpec) *exec.Cmd {
	return func(ctx context.Context, spec ChildSpec) *exec.Cmd {
		b, _ := json.Marshal(spec)
		return exec.CommandContext(ctx, exe, append(slices.Clone(args), "-child", string(b))...)
	}
}

// n is the stream length of cell c.
func (s *Suite) n(c Cell) int {
	if c.Handler.blocking() && s.NBlocking > 0 {
		return s.NBlocking
	}
	return s.N
}

// Run runs the grid and returns every result, failed runs included (with
// Err set). It stops early only when ctx ends.
func (s *Suite) Run(ctx context.Context) ([]Result, error) {
	var all []Result
	for _, c := range s.Cells {
		n := s.n(c)
		for rep := 1; rep <= s.Reps; rep++ {
			for _, impl := range s.Impls {
				var res Result
				if impl == "reactor" {
					if s.Reactor == nil {
						continue
					}
					rctx, cancel := context.WithTimeout(ctx, s.ChildTimeout)
					res = s.Reactor.Run(rctx, c, n)
					cancel()
					res.Rep = rep
				} else {
					res = s.child(ctx, ChildSpec{Impl: impl, Cell: c, N: n, Warmup: n / 10, Verify: s.Verify, Rep: rep})
				}
				s.log(res)
				all = append(all, res)
				if err := ctx.Err(); err != nil {
					return all, err
				}
			}
		}
		sat := median(nsOf(all, "aggflow", c))
		if len(s.Loads) == 0 || sat <= 0 || !slices.Contains(s.Impls, "aggflow") {
			continue
		}
		for rep := 1; rep <= s.Reps; rep++ {
			for _, load := range s.Loads {
				rate := load * 1e9 / sat
				ln := min(n, max(1000, int(rate*s.LatencySeconds)))
				for _, impl := range LatencyImpls {
					if !slices.Contains(s.Impls, impl) {
						continue
					}
					var res Result
					if impl == "reactor" {
						if s.Reactor == nil {
							continue
						}
						rctx, cancel := context.WithTimeout(ctx, s.ChildTimeout)
						res = s.Reactor.RunLatency(rctx, c, ln, rate)
						cancel()
						res.Rep, res.Load = rep, load
					} else {
						res = s.child(ctx, ChildSpec{Impl: impl, Cell: c, N: ln, Warmup: ln / 10, Verify: s.Verify, Rate: rate, Load: load, Rep: rep})
					}
					s.log(res)
					all = append(all, res)
					if err := ctx.Err(); err != nil {
						return all, err
					}
				}
			}
		}
	}
	return all, nil
}

func (s *Suite) child(ctx context.Context, spec ChildSpec) Result {
	ctx, cancel := context.WithTimeout(ctx, s.ChildTimeout)
	defer cancel()
	fail := func(err error) Result {
		return Result{Impl: spec.Impl, Cell: spec.Cell, N: spec.N, Rep: spec.Rep, Load: spec.Load, Rate: spec.Rate, Err: err.Error()}
	}
	cmd := s.Child(ctx, spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("bench: child %s %s: %w: %s", spec.Impl, spec.Cell, err, bytes.TrimSpace(stderr.Bytes())))
	}
	var res Result
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		return fail(fmt.Errorf("bench: child %s %s printed %q: %w", spec.Impl, spec.Cell, out, err))
	}
	return res
}

func (s *Suite) log(r Result) {
	if s.Log == nil {
		return
	}
	var what string
	switch {
	case r.Err != "":
		what = "FAILED: " + r.Err
	case r.Latency != nil:
		what = fmt.Sprintf("load %.0f%% (%.0f/s offered, %.0f/s achieved): wait p50 %.1f µs, p90 %.1f µs, p99 %.1f µs, p99.9 %.1f µs",
			100*r.Load, r.Rate, r.Latency.Achieved, r.Latency.P50/1e3, r.Latency.P90/1e3, r.Latency.P99/1e3, r.Latency.P999/1e3)
	default:
		what = fmt.Sprintf("%.1f ns/exchange, %.3f allocs/exchange, %d goroutines, %.1f MiB peak RSS",
			r.NsPerEx, r.AllocsPerEx, r.Goroutines, float64(r.RSSKB)/1024)
	}
	fmt.Fprintf(s.Log, "%-8s %-22s n=%d rep %d: %s\n", r.Impl, r.Cell, r.N, r.Rep, what)
}

// ErrFailedRuns is returned (wrapped) when some runs failed.
var ErrFailedRuns = errors.New("bench: some runs failed")

// Failures returns the failed results' errors.
func Failures(results []Result) error {
	var errs []error
	for _, r := range results {
		if r.Err != "" {
			errs = append(errs, fmt.Errorf("%s %s rep %d: %s", r.Impl, r.Cell, r.Rep, r.Err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrFailedRuns, errors.Join(errs...))
}

// nsOf returns the ns/exchange of impl's successful throughput runs on c.
func nsOf(results []Result, impl string, c Cell) []float64 {
	var v []float64
	for _, r := range results {
		if r.Impl == impl && r.Cell == c && r.Err == "" && r.Latency == nil && r.Rate == 0 {
			v = append(v, r.NsPerEx)
		}
	}
	return v
}

// median returns the median of v (the mean of the middle two for an even
// count), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
