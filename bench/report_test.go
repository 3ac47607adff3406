package bench_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aggflow/aggflow/bench"
)

func TestReport(t *testing.T) {
	var results []bench.Result
	for _, k := range []int{1, 1024} {
		c := bench.Cell{K: k, P: 128, Handler: bench.Noop}
		for rep, ns := range []float64{400, 300, 500} {
			results = append(results,
				bench.Result{Impl: "aggflow", Cell: c, N: 10, Rep: rep + 1, NsPerEx: ns, AllocsPerEx: 0.1, Goroutines: 4, RSSKB: 20480, Handled: 10},
				bench.Result{Impl: "sharded", Cell: c, N: 10, Rep: rep + 1, NsPerEx: ns / 2, Goroutines: 129, RSSKB: 10240, Handled: 10},
				bench.Result{Impl: "reactor", Cell: c, N: 10, Rep: rep + 1, NsPerEx: ns * 2, AllocsPerEx: -1, Goroutines: -1, RSSKB: 102400, Handled: 10})
		}
		results = append(results,
			bench.Result{Impl: "aggflow", Cell: c, N: 10, Rep: 1, Load: 0.5, Rate: 1250000, Latency: &bench.Latency{P50: 1500, P90: 25000, P99: 120000, P999: 300000, Achieved: 1249000}})
		if k == 1 {
			results = append(results, bench.Result{Impl: "sharded", Cell: c, N: 10, Rep: 1, Load: 0.5, Rate: 1250000, Err: "bench: boom"})
			continue
		}
		results = append(results,
			bench.Result{Impl: "sharded", Cell: c, N: 10, Rep: 1, Load: 0.5, Rate: 1250000, Latency: &bench.Latency{P50: 1000, P90: 2000, P99: 60000, P999: 90000, Achieved: 1250000}},
			bench.Result{Impl: "reactor", Cell: c, N: 10, Rep: 1, Load: 0.5, Rate: 1250000, AllocsPerEx: -1, Goroutines: -1, Latency: &bench.Latency{P50: 200000, P90: 900000, P99: 8000000, P999: 12000000, Achieved: 1000000}})
	}
	dir := t.TempDir()
	charts, err := bench.WriteCharts(dir, results)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != 1 || charts[0] != "streaming-noop-p128.png" {
		t.Fatalf("charts %v", charts)
	}
	if fi, err := os.Stat(filepath.Join(dir, charts[0])); err != nil || fi.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
	var b strings.Builder
	if err := bench.WriteMarkdown(&b, bench.Meta{N: 10, NBlocking: 10, Reps: 3}, results, charts); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| handler | ids | groups | sharded | aggflow | reactor |",
		"| noop | 1024 | 128 | 200 (0.50x) | 400 (1.00x) | 800 (2.00x) |", // medians of the three
		"| noop | 1 | 128 | 0.000 | 0.100 | n/a |",                        // sharded, aggflow, reactor
		"| noop | 1 | 128 | 10 | 20 | 100 |",                              // MiB
		// sharded failed, aggflow, reactor not run; no ratio without sharded
		"| noop | 1 | 128 | 50% | 1250000 | failed | | 1.5 / 25 / 120 / 300 | 1249000 | | | |",
		// every quantile, achieved, and aggflow's p99 over sharded's
		"| noop | 1024 | 128 | 50% | 1250000 | 1.0 / 2.0 / 60 / 90 | 1250000 | 1.5 / 25 / 120 / 300 | 1249000 | 200 / 900 / 8000 / 12000 | 1000000 | 2.00 |",
		"![ns per exchange by number of ids](streaming-noop-p128.png)",
		"sharded noop/k1/p128 rep 1: bench: boom",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
