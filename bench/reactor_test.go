package bench_test

import (
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
