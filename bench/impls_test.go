package bench_test

import (
	"fmt"
	"testing"

	"github.com/aggflow/aggflow/bench"
)

// testCells are small cells that still cover one hot id, a few ids, more ids
// than groups, every handler and a group count above the ring size.
var testCells = []struct {
	cell bench.Cell
	n    int
}{
	{bench.Cell{K: 1, P: 16, Handler: bench.Noop}, 5000},
	{bench.Cell{K: 16, P: 128, Handler: bench.Noop}, 20000},
	{bench.Cell{K: 1024, P: 16, Handler: bench.Noop}, 20000},
	{bench.Cell{K: 100000, P: 1024, Handler: bench.Noop}, 20000},
	{bench.Cell{K: 1024, P: 128, Handler: bench.Spin1us}, 2000},
	{bench.Cell{K: 1024, P: 128, Handler: bench.Sleep50us}, 200},
	{bench.Cell{K: 16, P: 16, Handler: bench.GoSleep50us}, 50},
}

// TestOrderAndCount runs every implementation with the order check on: each
// id's exchanges must be handled exactly once, in production order.
func TestOrderAndCount(t *testing.T) {
	for _, im := range bench.Impls {
		for _, tc := range testCells {
			t.Run(fmt.Sprintf("%s/%s", im.Name, tc.cell), func(t *testing.T) {
				w := bench.NewWorkload(tc.cell.K, tc.n)
				res := bench.Measure(im, tc.cell, w, tc.n, bench.RunOptions{Verify: true})
				if res.Err != "" {
					t.Fatal(res.Err)
				}
				if res.Handled != int64(tc.n) {
					t.Fatalf("handled %d of %d", res.Handled, tc.n)
				}
			})
		}
	}
}

// TestPacedRun runs the latency mode: a paced producer and one wait
// recorded per exchange.
func TestPacedRun(t *testing.T) {
	for _, name := range []string{"aggflow", "sharded"} {
		im, ok := bench.LookupImpl(name)
		if !ok {
			t.Fatalf("no implementation %q", name)
		}
		t.Run(name, func(t *testing.T) {
			c := bench.Cell{K: 1024, P: 128, Handler: bench.Noop}
			const n = 2000
			res := bench.Measure(im, c, bench.NewWorkload(c.K, n), n, bench.RunOptions{Verify: true, Rate: 100000})
			if res.Err != "" {
				t.Fatal(res.Err)
			}
			l := res.Latency
			if l == nil {
				t.Fatal("no latency recorded")
			}
			if !(0 <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999) {
				t.Fatalf("quantiles out of order: %+v", *l)
			}
			// 2,000 exchanges at 100,000/s take 20 ms: the producer cannot
			// have been much faster than that.
			if l.Achieved <= 0 || l.Achieved > 150000 {
				t.Fatalf("achieved rate %.0f/s for an offered 100000/s", l.Achieved)
			}
		})
	}
}
