package jetstream_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// handled is one line a child wrote: an exchange as its handler saw it.
type handled struct {
	key     string
	seq     uint64
	attempt int
}

// report is what checkRuns found.
type report struct {
	records     int
	redelivered int // records whose attempt was above 1
	duplicates  int // records of a sequence seen before: in-order replays
	firstTry    int // of which delivered as a first attempt: never a replay
	violations  int // a sequence that is not the next one of its run (a reordering or a gap)
	lost        int // sequences never handled
}

// checkRuns checks the records of several runs (each a process's handling
// order, the runs in the order they ran) against keys aggregates of perKey
// sequences each: within a run, an aggregate's sequences must follow one
// another (prev + 1); a run may begin an aggregate at or below the last
// sequence seen plus one (an in-order replay after a crash), never above.
func checkRuns(runs [][]handled, keys []string, perKey uint64) report {
	return check(runs, keys, perKey, false)
}

// checkReplays is checkRuns for processes that reset their partitions while
// they run: within a run too, an aggregate may go back to a sequence at or
// below the previous one, as a redelivery (attempt 2 or more) that begins
// an in-order replay; any other step is a violation.
func checkReplays(runs [][]handled, keys []string, perKey uint64) report {
	return check(runs, keys, perKey, true)
}

func check(runs [][]handled, keys []string, perKey uint64, resets bool) report {
	var r report
	last := map[string]uint64{}
	seen := map[string]map[uint64]bool{}
	for _, run := range runs {
		prev := map[string]uint64{}
		for _, h := range run {
			r.records++
			if h.attempt > 1 {
				r.redelivered++
			}
			p, inRun := prev[h.key]
			switch {
			case inRun && resets && h.seq <= p && h.attempt >= 2:
				// an in-order replay begins within the run
			case inRun && h.seq != p+1:
				r.violations++
			case !inRun && h.seq > last[h.key]+1:
				r.violations++ // a gap at the start of a run
			}
			if h.seq <= last[h.key] {
				r.duplicates++
				if h.attempt < 2 {
					r.firstTry++
				}
			}
			prev[h.key] = h.seq
			last[h.key] = max(last[h.key], h.seq)
			if seen[h.key] == nil {
				seen[h.key] = map[uint64]bool{}
			}
			seen[h.key][h.seq] = true
		}
	}
	for _, k := range keys {
		for s := uint64(1); s <= perKey; s++ {
			if !seen[k][s] {
				r.lost++
			}
		}
	}
	return r
}

// readRun parses a child's file.
func readRun(t testing.TB, path string) []handled {
	var run []handled
	readLines(t, path, 3, func(h handled, _ [][]byte) { run = append(run, h) })
	return run
}

// readLines parses a file of records of n fields a line, the first three
// an exchange as handled ("key seq attempt"), and calls each with it and the
// line's fields. A missing file has no line.
func readLines(t testing.TB, path string, n int, each func(handled, [][]byte)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		require.Len(t, f, n, "line %q", sc.Text())
		seq, err := strconv.ParseUint(string(f[1]), 10, 64)
		require.NoError(t, err)
		attempt, err := strconv.Atoi(string(f[2]))
		require.NoError(t, err)
		each(handled{key: string(f[0]), seq: seq, attempt: attempt}, f)
	}
}

func TestCheckRunsFindsReorderingsGapsLossAndReplays(t *testing.T) {
	keys := []string{"a", "b"}
	h := func(k string, seq uint64, attempt int) handled { return handled{k, seq, attempt} }
	clean := [][]handled{{h("a", 1, 1), h("b", 1, 1), h("a", 2, 1), h("b", 2, 1)}}
	require.Equal(t, report{records: 4}, checkRuns(clean, keys, 2))

	replay := [][]handled{{h("a", 1, 1), h("a", 2, 1)}, {h("a", 2, 2), h("b", 1, 1), h("b", 2, 1)}}
	require.Equal(t, report{records: 5, redelivered: 1, duplicates: 1}, checkRuns(replay, keys, 2))

	reordered := [][]handled{{h("a", 2, 1), h("a", 1, 2), h("b", 1, 1), h("b", 2, 1)}}
	got := checkRuns(reordered, keys, 2)
	require.Equal(t, 2, got.violations, "the first is a gap, the second goes back")
	require.Equal(t, 1, got.duplicates)

	inRun := [][]handled{{h("a", 1, 1), h("a", 2, 1), h("a", 2, 2), h("a", 3, 1), h("b", 1, 1), h("b", 2, 1)}}
	require.Equal(t, 1, checkRuns(inRun, keys, 3).violations, "a replay within a run, not allowed by checkRuns")
	require.Equal(t, report{records: 6, redelivered: 1, duplicates: 1, lost: 1}, checkReplays(inRun, keys, 3))
	require.Equal(t, 2, checkReplays([][]handled{{h("a", 2, 1), h("a", 1, 1)}}, keys, 2).violations, "a gap at the start, then going back on a first attempt")
	require.Equal(t, 1, checkReplays([][]handled{{h("a", 1, 1), h("a", 3, 2), h("a", 2, 2)}}, keys, 3).violations, "a skip, then a replay")

	lost := [][]handled{{h("a", 1, 1)}, {h("a", 3, 1)}}
	got = checkRuns(lost, keys, 3)
	require.Equal(t, 1, got.violations, "a run began past a sequence never handled")
	require.Equal(t, 4, got.lost, "a's second and b's three")
}

// A model check: one run per cut of an aggregate's sequence 1..n, each run
// replaying from any point at or below where the previous one got to, is
// clean; lowering any one sequence of it is caught.
func TestCheckRunsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(1, 50).Draw(t, "n")
		var runs [][]handled
		var done uint64
		for done < n {
			from := rapid.Uint64Range(1, done+1).Draw(t, "from")
			to := rapid.Uint64Range(max(from, done+1), n).Draw(t, "to")
			var run []handled
			for s := from; s <= to; s++ {
				run = append(run, handled{"k", s, 2})
			}
			runs, done = append(runs, run), to
		}
		r := checkRuns(runs, []string{"k"}, n)
		if r.violations != 0 || r.lost != 0 || r.firstTry != 0 {
			t.Fatalf("clean runs reported %+v", r)
		}
		i := rapid.IntRange(0, len(runs)-1).Draw(t, "run")
		j := rapid.IntRange(0, len(runs[i])-1).Draw(t, "at")
		if runs[i][j].seq == 1 || j == 0 {
			return // nothing to lower, or the start of a run, which may replay
		}
		runs[i][j].seq--
		if r := checkRuns(runs, []string{"k"}, n); r.violations == 0 {
			t.Fatalf("a lowered sequence was not caught: %+v in %s", r, fmt.Sprint(runs))
		}
	})
}
