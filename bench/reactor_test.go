package bench_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aggflow/aggflow/bench"
)

func TestWarmUpSettle(t *testing.T) {
	w := bench.WarmUp{Min: 6, Max: 10, Within: 0.05, Timed: 3}
	cases := []struct {
		name    string
		passes  []float64 // ns/exchange per pass, in run order
		warmups int
		timed   []float64
		settled bool
	}{
		// The JIT settles after pass 7: passes 7 and 8 agree within 5%.
		{"settles late", []float64{900, 500, 300, 260, 200, 170, 150, 130, 128, 127, 126, 125, 124},
			9, []float64{127, 126, 125}, true},
		// Settled from the start: still at least Min warm-ups.
		{"at least Min", []float64{130, 129, 128, 127, 126, 125, 124, 123, 122, 121, 120, 119, 118},
			6, []float64{124, 123, 122}, true},
		// Never within 5%: the cap, reported as not settled.
		{"capped", []float64{100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100},
			10, []float64{100, 200, 100}, false},
	}
	for _, c := range cases {
		n, timed, settled := w.Settle(c.passes)
		if n != c.warmups || !slices.Equal(timed, c.timed) || settled != c.settled {
			t.Errorf("%s: Settle = %d, %v, %v; want %d, %v, %v", c.name, n, timed, settled, c.warmups, c.timed, c.settled)
		}
	}
}

func TestParseReactorPasses(t *testing.T) {
	line := "impl=reactor-plain keys=1024 groups=128 handler=noop n=1000 threads=2 items_per_s=4000000 ns_per_ex=250.0 reps=[2000000.0, 4000000.0, 5000000.0] peak_rss_kb=512345\n"
	got, err := bench.ParseReactorPasses(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{500, 250, 200}; !slices.Equal(got, want) {
		t.Fatalf("passes %v, want %v", got, want)
	}
	if _, err := bench.ParseReactorPasses("impl=reactor-plain ns_per_ex=250.0"); err == nil {
		t.Fatal("no error for a line without passes")
	}
}

func TestReportListsReactorWarmUps(t *testing.T) {
	c := bench.Cell{K: 1024, P: 128, Handler: bench.Noop}
	results := []bench.Result{
		{Impl: "aggflow", Cell: c, N: 10, Rep: 1, NsPerEx: 100, Handled: 10},
		{Impl: "reactor", Cell: c, N: 10, Rep: 1, NsPerEx: 130, AllocsPerEx: -1, Goroutines: -1, Handled: 10, Warmups: 9, Spread: 0.031},
		{Impl: "reactor", Cell: c, N: 10, Rep: 2, NsPerEx: 150, AllocsPerEx: -1, Goroutines: -1, Handled: 10, Warmups: 20, Spread: 0.4, Unsettled: true},
	}
	var b strings.Builder
	if err := bench.WriteMarkdown(&b, bench.Meta{}, results, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| noop | 1024 | 128 | 9 warm-ups, 130 ns, spread 3.1%; 20 warm-ups (the cap: not settled), 150 ns, spread 40.0% |",
		"| noop | 1024 | 128 | 100 (1.00x) | 140 (1.40x) |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseReactorLatency(t *testing.T) {
	line := "impl=reactor keys=1024 groups=128 handler=noop n=300000 threads=2 rate=500000 achieved=382850 p50_ns=191354 p90_ns=1143111 p99_ns=8184094 p999_ns=13063143 peak_rss_kb=121340\n"
	res := bench.Result{N: 300000}
	if err := bench.ParseReactorLatency(line, &res); err != nil {
		t.Fatal(err)
	}
	want := bench.Latency{P50: 191354, P90: 1143111, P99: 8184094, P999: 13063143, Achieved: 382850}
	if res.Latency == nil || *res.Latency != want || res.RSSKB != 121340 || res.Handled != 300000 {
		t.Fatalf("parsed %+v, latency %+v; want %+v", res, res.Latency, want)
	}
	if err := bench.ParseReactorLatency("impl=reactor p50_ns=1 p90_ns=2", &res); err == nil {
		t.Fatal("no error for a line without every quantile")
	}
}

// The latency harness compiles with ReactorBench and measures a short paced
// run, where a JDK and the baseline are found (AGGFLOW_REACTOR_DIR, else
// ReactorDirs).
func TestReactorRunLatency(t *testing.T) {
	dirs := bench.ReactorDirs
	if d := os.Getenv("AGGFLOW_REACTOR_DIR"); d != "" {
		dirs = []string{d}
	}
	dir, ok := bench.FindReactorDir(dirs...)
	if !ok {
		t.Skipf("no ReactorBench.java in %v", dirs)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no javac")
	}
	rb := &bench.Reactor{Dir: dir, WarmUp: bench.WarmUp{Min: 1}}
	if err := rb.Compile(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	c := bench.Cell{K: 16, P: 128, Handler: bench.Noop}
	res := rb.RunLatency(t.Context(), c, 20000, 200000)
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	l := res.Latency
	if !(0 <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999) || l.Achieved <= 0 || l.Achieved > 300000 {
		t.Fatalf("latency %+v for 20,000 exchanges offered at 200,000/s", *l)
	}
	if res.Handled != 20000 || res.RSSKB <= 0 || res.Rate != 200000 {
		t.Fatalf("result %+v", res)
	}
}
