package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Reactor runs ReactorBench (../shared/baselines/reactor/) on the JVM: one
// java process per run, compiled once into a temporary directory.
type Reactor struct {
	Dir     string // the directory holding ReactorBench.java and its jars
	WarmUp  WarmUp // how the JIT is let settle; zero fields take DefaultWarmUp's
	classes string
}

// ReactorDirs are the places a Reactor baseline is looked for when none is
// given: relative to the repository root and to the bench module.
var ReactorDirs = []string{"../shared/baselines/reactor", "../../shared/baselines/reactor"}

// FindReactorDir returns the first of dirs holding ReactorBench.java.
func FindReactorDir(dirs ...string) (string, bool) {
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "ReactorBench.java")); err == nil {
			return d, true
		}
	}
	return "", false
}

func (rb *Reactor) classpath() string {
	return strings.Join([]string{rb.classes,
		filepath.Join(rb.Dir, "reactor-core-3.8.6-bench.jar"),
		filepath.Join(rb.Dir, "reactive-streams.jar")}, string(os.PathListSeparator))
}

// reactorLatencySource is the paced-source harness of the latency runs
// (RunLatency), compiled with ReactorBench against the same jars.
//
//go:embed reactorlatency/ReactorLatency.java
var reactorLatencySource []byte

// Compile compiles ReactorBench.java, and the latency harness, into a fresh
// temporary directory, which Close removes. It fails when java or javac is
// missing.
func (rb *Reactor) Compile(ctx context.Context) error {
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("bench: reactor: %s not found: %w", tool, err)
		}
	}
	dir, err := os.MkdirTemp("", "reactorbench-")
	if err != nil {
		return err
	}
	rb.classes = dir
	latency := filepath.Join(dir, "ReactorLatency.java")
	if err := os.WriteFile(latency, reactorLatencySource, 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "javac", "-nowarn", "-cp", rb.classpath(), "-d", dir,
		filepath.Join(rb.Dir, "ReactorBench.java"), latency).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bench: reactor: javac: %w: %s", err, out)
	}
	return nil
}

// Close removes the compiled classes.
func (rb *Reactor) Close() error {
	if rb.classes == "" {
		return nil
	}
	return os.RemoveAll(rb.classes)
}

// Run runs n exchanges over c with 2 scheduler threads, the "plain" shape,
// in one JVM: WarmUp.Max + WarmUp.Timed passes, of which Settle picks the
// timed ones. res.NsPerEx is their median, res.Warmups the passes before
// them, res.Spread their (max - min) / median; res.Unsettled says the cap
// was reached (the run is kept, and marked in the report). Cost: Max + Timed passes over the stream (23 by
// default, about 5 s at 1,024 ids and 1M exchanges).
func (rb *Reactor) Run(ctx context.Context, c Cell, n int) Result {
	res := Result{Impl: "reactor", Cell: c, N: n, AllocsPerEx: -1, Goroutines: -1}
	w := rb.WarmUp.withDefaults()
	out, err := rb.java(ctx, "ReactorBench", "plain",
		strconv.Itoa(c.K), strconv.Itoa(c.P), c.Handler.reactorName(), strconv.Itoa(n), "2",
		"0", strconv.Itoa(w.Max+w.Timed))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if err := ParseReactorLine(out, &res); err != nil {
		res.Err = err.Error()
		return res
	}
	passes, err := ParseReactorPasses(out)
	if err == nil && len(passes) != w.Max+w.Timed {
		err = fmt.Errorf("bench: reactor: %d passes, want %d", len(passes), w.Max+w.Timed)
	}
	if err != nil {
		res.Err = err.Error()
		return res
	}
	warmups, timed, settled := w.Settle(passes)
	sorted := slices.Sorted(slices.Values(timed))
	res.NsPerEx, res.Warmups = sorted[len(sorted)/2], warmups
	res.Spread = (sorted[len(sorted)-1] - sorted[0]) / res.NsPerEx
	res.Unsettled = !settled
	return res
}

// RunLatency runs, in one JVM, WarmUp.Min unpaced passes over the first ln
// exchanges of c's stream (the JIT's warm-up), then one pass whose source is
// paced at rate exchanges per second, the waits from send to handler start
// recorded as Measure records them: res.Latency. The source slows down when
// the pipeline pushes back, as the Go producer does; Latency.Achieved says
// how far. 2 scheduler threads, the plain shape, as Run.
func (rb *Reactor) RunLatency(ctx context.Context, c Cell, ln int, rate float64) Result {
	res := Result{Impl: "reactor", Cell: c, N: ln, Rate: rate, AllocsPerEx: -1, Goroutines: -1}
	w := rb.WarmUp.withDefaults()
	out, err := rb.java(ctx, "ReactorLatency",
		strconv.Itoa(c.K), strconv.Itoa(c.P), c.Handler.reactorName(), strconv.Itoa(ln), "2",
		strconv.Itoa(w.Min), strconv.FormatFloat(rate, 'f', 0, 64))
	if err == nil {
		err = ParseReactorLatency(out, &res)
	}
	if err != nil {
		res.Err = err.Error()
	}
	return res
}

// java runs the compiled class main with args in a JVM of 4 GiB of heap and
// returns what it printed; the error carries its standard error.
func (rb *Reactor) java(ctx context.Context, main string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "java", append([]string{"-Xmx4g", "-cp", rb.classpath(), main}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("bench: reactor: %w", err)
	}
	return string(out), nil
}

// reactorFields splits a harness's output line into its key=value fields.
func reactorFields(line string) map[string]string {
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	return fields
}

// ParseReactorLatency reads ReactorLatency's output line (key=value
// fields) into res: the wait quantiles (p50_ns, p90_ns, p99_ns, p999_ns),
// the achieved rate and peak_rss_kb.
func ParseReactorLatency(line string, res *Result) error {
	fields := reactorFields(line)
	var l Latency
	var rss int64
	var err error
	for _, f := range []struct {
		key string
		v   *float64
	}{{"p50_ns", &l.P50}, {"p90_ns", &l.P90}, {"p99_ns", &l.P99}, {"p999_ns", &l.P999}, {"achieved", &l.Achieved}} {
		var e error
		*f.v, e = strconv.ParseFloat(fields[f.key], 64)
		err = errors.Join(err, e)
	}
	rss, e := strconv.ParseInt(fields["peak_rss_kb"], 10, 64)
	if err = errors.Join(err, e); err != nil {
		return fmt.Errorf("bench: reactor: cannot read the wait quantiles, achieved and peak_rss_kb from %q", strings.TrimSpace(line))
	}
	res.Latency, res.RSSKB, res.Handled = &l, rss, int64(res.N)
	return nil
}

// ParseReactorLine reads ReactorBench's output line (key=value fields) into
// res: ns_per_ex and peak_rss_kb.
func ParseReactorLine(line string, res *Result) error {
	fields := reactorFields(line)
	ns, err1 := strconv.ParseFloat(fields["ns_per_ex"], 64)
	rss, err2 := strconv.ParseInt(fields["peak_rss_kb"], 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bench: reactor: cannot read ns_per_ex and peak_rss_kb from %q", strings.TrimSpace(line))
	}
	res.NsPerEx, res.RSSKB, res.Handled = ns, rss, int64(res.N)
	return nil
}

// WarmUp is how long Reactor's JIT is let settle before its timed passes: at
// least Min passes, then until two consecutive passes agree within Within
// (a fraction), at most Max; then Timed passes are timed.
type WarmUp struct {
	Min, Max int
	Within   float64
	Timed    int
}

// DefaultWarmUp: 2 warm-ups, as before, left K=1024 at about twice its
// settled time (256 against 129 ns).
var DefaultWarmUp = WarmUp{Min: 6, Max: 20, Within: 0.05, Timed: 3}

func (w WarmUp) withDefaults() WarmUp {
	d := DefaultWarmUp
	if w.Min > 0 {
		d.Min = w.Min
	}
	if w.Max > 0 {
		d.Max = max(w.Max, d.Min)
	}
	if w.Within > 0 {
		d.Within = w.Within
	}
	if w.Timed > 0 {
		d.Timed = w.Timed
	}
	return d
}

// Settle splits per-pass figures (ns/exchange, in run order; at least
// Max + Timed of them) into the warm-up and the timed passes: warmups is
// the least count from Min to Max whose last two passes agree within
// Within, or Max with settled false; timed are the Timed passes after.
func (w WarmUp) Settle(passes []float64) (warmups int, timed []float64, settled bool) {
	w = w.withDefaults()
	warmups = w.Max
	for n := max(w.Min, 2); n <= w.Max; n++ {
		a, b := passes[n-2], passes[n-1]
		if math.Abs(a-b) <= w.Within*min(a, b) {
			warmups, settled = n, true
			break
		}
	}
	return warmups, passes[warmups : warmups+w.Timed], settled
}

var reactorPasses = regexp.MustCompile(`reps=\[([^\]]*)\]`)

// ParseReactorPasses reads the per-pass rates of ReactorBench's line
// (reps=[items/s, ...]) as ns/exchange.
func ParseReactorPasses(line string) ([]float64, error) {
	m := reactorPasses.FindStringSubmatch(line)
	if m == nil || strings.TrimSpace(m[1]) == "" {
		return nil, fmt.Errorf("bench: reactor: no passes (reps=[...]) in %q", strings.TrimSpace(line))
	}
	var ns []float64
	for _, f := range strings.Split(m[1], ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("bench: reactor: bad pass %q in %q", f, strings.TrimSpace(line))
		}
		ns = append(ns, 1e9/r)
	}
	return ns, nil
}
