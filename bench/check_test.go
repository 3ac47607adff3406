package bench_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/bench"
)

// TestWorkloadMatchesReactorBench pins the draws to java.util.SplittableRandom
// (JDK 17): new SplittableRandom(k).nextInt(k), eight times, as ReactorBench
// draws its ids.
func TestWorkloadMatchesReactorBench(t *testing.T) {
	want := map[int][]int32{
		1:       {0, 0, 0, 0, 0, 0, 0, 0},
		16:      {14, 1, 4, 0, 7, 8, 7, 7},
		1000:    {864, 953, 46, 42, 641, 148, 845, 548},
		100000:  {56227, 54749, 62029, 26860, 49046, 44196, 50617, 37705},
		1000000: {132591, 521868, 7521, 913926, 230514, 149162, 676018, 412065},
	}
	for k, seq := range want {
		w := bench.NewWorkload(k, len(seq))
		if !slices.Equal(w.Seq, seq) {
			t.Errorf("k=%d: draws %v, Java draws %v", k, w.Seq, seq)
		}
		if w.Keys[k-1] != aggregate.NewKey("account-"+strconv.Itoa(k-1)) {
			t.Errorf("k=%d: last id %q", k, w.Keys[k-1].ID())
		}
	}
}

// brokenImpls break the contract in each way the check must catch.
var brokenImpls = map[string]func(r *bench.Run) (int64, error){
	// reverse handles everything, last produced first.
	"reverse": func(r *bench.Run) (int64, error) {
		var all []bench.Exchange
		err := r.Produce(func(x bench.Exchange) bool { all = append(all, x); return true })
		for i := len(all) - 1; i >= 0; i-- {
			r.Handle(all[i])
		}
		return int64(len(all)), err
	},
	// drop skips the last exchange but claims it.
	"drop": func(r *bench.Run) (int64, error) {
		var n int64
		err := r.Produce(func(x bench.Exchange) bool {
			if n++; n < int64(r.N) {
				r.Handle(x)
			}
			return true
		})
		return n, err
	},
	// twice handles the first exchange two times and claims the right count.
	"twice": func(r *bench.Run) (int64, error) {
		var n int64
		err := r.Produce(func(x bench.Exchange) bool {
			if n == 0 {
				r.Handle(x)
			}
			r.Handle(x)
			n++
			return true
		})
		return n, err
	},
	// short handles all it gets and says so, having been given one less.
	"short": func(r *bench.Run) (int64, error) {
		var n int64
		err := r.Produce(func(x bench.Exchange) bool { r.Handle(x); n++; return true })
		return n - 1, err
	},
}

func TestVerifyCatchesBrokenImplementations(t *testing.T) {
	c := bench.Cell{K: 4, P: 2, Handler: bench.Noop}
	w := bench.NewWorkload(c.K, 100)
	for name, run := range brokenImpls {
		res := bench.Measure(bench.Impl{Name: name, Run: run}, c, w, 100, bench.RunOptions{Verify: true})
		if res.Err == "" {
			t.Errorf("%s: no error from the check", name)
		}
	}
}

func TestCells(t *testing.T) {
	for _, c := range append(bench.HeadlineCells(), bench.CrossCells(bench.GridHandlers, bench.GridGroups, bench.GridKeys)...) {
		got, err := bench.ParseCell(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCell(%q) = %v, %v", c, got, err)
		}
	}
	if n := len(bench.HeadlineCells()); n != 7 {
		t.Errorf("%d headline cells, want 7", n)
	}
	for _, bad := range []string{"", "noop/1024/p128", "nop/k1/p1", "noop/k0/p128", "noop/k1/p"} {
		if _, err := bench.ParseCell(bad); err == nil {
			t.Errorf("ParseCell(%q) accepted", bad)
		}
	}
}

func TestParseReactorLine(t *testing.T) {
	line := "impl=reactor-plain keys=1024 groups=128 handler=noop n=2000000 threads=2 items_per_s=3790000 ns_per_ex=263.9 reps=[3790000.0] peak_rss_kb=512345\n"
	res := bench.Result{N: 2000000}
	if err := bench.ParseReactorLine(line, &res); err != nil {
		t.Fatal(err)
	}
	if res.NsPerEx != 263.9 || res.RSSKB != 512345 || res.Handled != 2000000 {
		t.Fatalf("read %+v", res)
	}
	if err := bench.ParseReactorLine("Exception in thread main", &res); err == nil {
		t.Fatal("no error for a line without figures")
	}
}
