package jetstream_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The multi-process tests: the server in the test process, two consumer
// processes (this binary re-executed as runChild) owning 4 of 8 partitions
// each, 100,000 keyed exchanges (1,000 aggregates of 100 sequences)
// published before they start.
const (
	mpPartitions = 8
	mpKeys       = 1000
	mpPerKey     = 100
	mpDeadline   = 150 * time.Second // a bound: a run takes 5 s, 17-25 s under the race detector
)

var (
	ownedA = "0,1,2,3"
	ownedB = "4,5,6,7"
)

// proc is a child consumer process.
type proc struct {
	cmd     *exec.Cmd
	out     string // the records
	errPath string // its standard error
}

// stderr returns what the child wrote to its standard error.
func (p *proc) stderr() string {
	data, _ := os.ReadFile(p.errPath)
	return string(data)
}

func startChild(t *testing.T, e *env, own, out string, control bool, extra ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0]), out: out}
	p.cmd.Env = append(os.Environ(), envChild+"=1", envURL+"="+e.url(), envOwn+"="+own,
		envPartitions+"="+strconv.Itoa(mpPartitions), envOut+"="+out)
	if control {
		p.cmd.Env = append(p.cmd.Env, envControl+"=1")
	}
	p.cmd.Env = append(p.cmd.Env, extra...)
	p.errPath = out + ".stderr"
	for _, kv := range extra {
		member, ok := strings.CutPrefix(kv, envMember+"=")
		if !ok {
			member, ok = strings.CutPrefix(kv, envStatic+"=")
		}
		if ok {
			p.errPath = out + "." + member + ".stderr" // members may share their records' file
		}
	}
	stderr, err := os.Create(p.errPath)
	require.NoError(t, err)
	defer stderr.Close() // the child has its own descriptor
	p.cmd.Stderr = stderr
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// lines returns how many records the child wrote so far.
func (p *proc) lines() int {
	data, _ := os.ReadFile(p.out)
	return bytes.Count(data, []byte{'\n'})
}

// stop signals the child and waits for its exit; SIGTERM must end it
// cleanly (a graceful stop), SIGKILL ends it anyhow.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	err := p.cmd.Wait()
	if sig == syscall.SIGTERM {
		require.NoError(t, err, "child stderr: %s", p.stderr())
	}
}

// waitFor polls cond until it holds or the deadline passes; then it fails
// with the children's error output.
func waitFor(t *testing.T, deadline time.Time, what string, cond func() bool, children ...*proc) {
	t.Helper()
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range children {
				t.Logf("child %s: %s", p.out, p.stderr())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling another process's progress
	}
}

// drained reports whether every partition's ack floor reached its last
// sequence.
func (e *env) drained(t *testing.T) bool {
	for p := range int32(mpPartitions) {
		if e.ackFloor(t, childDurable, p) != e.lastSeq(t, p) {
			return false
		}
	}
	return true
}

// mpBacklog is what the control's A holds fetched and not handled when it is
// killed: half its pending budget.
const mpBacklog = 256

// ackPending returns how many messages the server delivered on the
// partitions own ("0,1,...") and has not seen acknowledged.
func (e *env) ackPending(t *testing.T, own string) int {
	t.Helper()
	n := 0
	for _, s := range strings.Split(own, ",") {
		info, err := e.js.Consumer(ctx(t), e.topo.Stream, childDurable+"-"+s)
		require.NoError(t, err)
		n += info.CachedInfo().NumAckPending
	}
	return n
}

func allKeys() []string {
	keys := make([]string, mpKeys)
	for k := range keys {
		keys[k] = keyName(k)
	}
	return keys
}

// handoff runs the scenario: A and B consume; once A handled a fifth of
// its share, A is stopped by sig and a new A takes its partitions over;
// when every partition is acknowledged to its end, both stop gracefully.
// It returns the check of the records, A's runs first.
func handoff(t *testing.T, sig syscall.Signal, control bool) report {
	e := newEnv(t, mpPartitions)
	dir := t.TempDir()
	deadline := time.Now().Add(mpDeadline)
	start := time.Now()
	published := make(chan error, 1)
	pubCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() { published <- e.publishAll(pubCtx, mpKeys, mpPerKey) }() // the consumers read meanwhile
	if control {
		// The control's A is killed with a backlog fetched and not handled,
		// which a consumer that keeps pace with the publisher may not have:
		// then nothing is lost and the control proves nothing.
		require.NoError(t, <-published)
		published <- nil
	}
	var stall []string
	if control {
		// ... and its handlers stop at that point, so that the backlog is
		// there however fast A handles on this machine.
		stall = []string{envStallAfter + "=" + strconv.Itoa(mpKeys*mpPerKey/10)}
	}
	a := startChild(t, e, ownedA, filepath.Join(dir, "a1"), control, stall...)
	b := startChild(t, e, ownedB, filepath.Join(dir, "b"), control)
	waitFor(t, deadline, "A to handle a fifth of its share", func() bool { return a.lines() >= mpKeys*mpPerKey/10 }, a, b)
	if control {
		waitFor(t, deadline, "A to hold a backlog", func() bool { return e.ackPending(t, ownedA) >= mpBacklog }, a, b)
	}
	holderA := e.owners(t)[0] // A's member name, on its leases
	stopped := time.Now()
	a.stop(t, sig)
	handledByA := a.lines()
	a2 := startChild(t, e, ownedA, filepath.Join(dir, "a2"), control)
	waitFor(t, deadline, "the new A to hold A's partitions", func() bool {
		for _, o := range e.owners(t)[:4] { // ownedA
			if o == "" || o == holderA {
				return false
			}
		}
		return true
	}, a2, b)
	t.Logf("the new A held A's partitions %v after A was stopped by %v", time.Since(stopped).Round(time.Millisecond), sig)
	require.NoError(t, <-published)
	t.Logf("published %d exchanges in %v", mpKeys*mpPerKey, time.Since(start).Round(time.Millisecond))
	waitFor(t, deadline, "every partition acknowledged to its end", func() bool { return e.drained(t) }, a2, b)
	a2.stop(t, syscall.SIGTERM)
	b.stop(t, syscall.SIGTERM)
	r := checkRuns([][]handled{readRun(t, a.out), readRun(t, a2.out), readRun(t, b.out)}, allKeys(), mpPerKey)
	t.Logf("%v in all: A handled %d before %v; %+v", time.Since(start).Round(time.Millisecond), handledByA, sig, r)
	return r
}

func TestMultiProcessKillReplaysInOrderAndLosesNothing(t *testing.T) {
	r := handoff(t, syscall.SIGKILL, false)
	require.Zero(t, r.violations, "per-key order")
	require.Zero(t, r.lost, "every sequence handled")
	require.Zero(t, r.firstTry, "a duplicate is a redelivery")
	require.GreaterOrEqual(t, r.records, mpKeys*mpPerKey)
}

func TestMultiProcessGracefulHandoffHasNoDuplicate(t *testing.T) {
	r := handoff(t, syscall.SIGTERM, false)
	r.redelivered = 0 // fetched by A and never handled: counted as attempts, conservatively
	require.Equal(t, report{records: mpKeys * mpPerKey}, r, "every exchange handled exactly once, in order")
}

// The control: a consumer that resumes from the server's delivery state
// instead of resetting to the ack floor is caught by the same checks. With
// AckAll, the restarted process's first cumulative acknowledgement covers
// what the killed one had fetched and not handled, so it is lost; were it
// redelivered by the ack wait instead, it would come after newer exchanges
// of its aggregates.
func TestMultiProcessControlWithoutResetIsCaught(t *testing.T) {
	r := handoff(t, syscall.SIGKILL, true)
	require.Positive(t, r.lost+r.violations, "the checks must catch a consumer that does not reset: %+v", r)
}

// hold waits until d passed since from: the length of a pause or of a run
// between pauses, a part of the scenario.
func hold(from time.Time, d time.Duration) { <-time.After(time.Until(from.Add(d))) }

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

// record is one line of the file the members of a dynamic assignment
// share: an exchange as a handler saw it, under its partition's lease, in
// the order the handlers ran.
type record struct {
	handled
	epoch  uint64
	member string
}

// epochReport is what checkEpochs found.
type epochReport struct {
	report
	stale int // records of an epoch below one seen before for their key: a stalled owner handled after the next one began
}

// checkEpochs checks records in the order they were handled, across
// processes: an aggregate's records of one epoch (one claim of its
// partition) must follow one another (prev + 1); a later epoch may begin
// at or below the last sequence seen plus one (an in-order replay), never
// above; and once a later epoch began, an earlier one must not handle the
// aggregate again (stale). A stale record is not counted as handled.
func checkEpochs(recs []record, keys []string, perKey uint64) epochReport {
	var r epochReport
	type state struct {
		epoch, prev, last uint64
		seen              map[uint64]bool
	}
	st := map[string]*state{}
	for _, h := range recs {
		r.records++
		if h.attempt > 1 {
			r.redelivered++
		}
		s := st[h.key]
		if s == nil {
			s = &state{seen: map[uint64]bool{}}
			st[h.key] = s
		}
		switch {
		case h.epoch < s.epoch:
			r.stale++
			continue
		case h.epoch > s.epoch && h.seq > s.last+1:
			r.violations++ // a gap at the start of an epoch
		case h.epoch == s.epoch && h.seq != s.prev+1:
			r.violations++
		}
		if h.seq <= s.last {
			r.duplicates++
			if h.attempt < 2 {
				r.firstTry++
			}
		}
		s.epoch, s.prev, s.last = h.epoch, h.seq, max(s.last, h.seq)
		s.seen[h.seq] = true
	}
	for _, k := range keys {
		for q := uint64(1); q <= perKey; q++ {
			if st[k] == nil || !st[k].seen[q] {
				r.lost++
			}
		}
	}
	return r
}

// readRecords parses the members' shared file.
func readRecords(t testing.TB, path string) []record {
	t.Helper()
	var recs []record
	readLines(t, path, 5, func(h handled, f [][]byte) {
		epoch, err := strconv.ParseUint(string(f[3]), 10, 64)
		require.NoError(t, err)
		recs = append(recs, record{h, epoch, string(f[4])})
	})
	return recs
}

func TestCheckEpochsFindsStaleOwnersGapsAndReplays(t *testing.T) {
	keys := []string{"a"}
	rec := func(seq uint64, attempt int, epoch uint64) record {
		return record{handled{"a", seq, attempt}, epoch, "m"}
	}
	clean := []record{rec(1, 1, 5), rec(2, 1, 5), rec(2, 2, 9), rec(3, 1, 9)}
	require.Equal(t, epochReport{report: report{records: 4, redelivered: 1, duplicates: 1}}, checkEpochs(clean, keys, 3))

	stale := []record{rec(1, 1, 5), rec(2, 1, 9), rec(2, 1, 5), rec(3, 1, 9)}
	require.Equal(t, 1, checkEpochs(stale, keys, 3).stale, "epoch 5 handled after epoch 9 began")

	gap := []record{rec(1, 1, 5), rec(3, 1, 9)}
	got := checkEpochs(gap, keys, 3)
	require.Equal(t, 1, got.violations)
	require.Equal(t, 1, got.lost)

	onlyStale := []record{rec(1, 1, 9), rec(2, 1, 5)}
	require.Equal(t, 1, checkEpochs(onlyStale, keys, 2).lost, "a stale record does not count as handled")
}

// A model check: epochs that each replay from at or below where the last
// one got to are clean; a record of an older epoch put after a newer one
// began is caught as stale.
func TestCheckEpochsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(1, 40).Draw(t, "n")
		var recs []record
		var done, epoch uint64
		for done < n {
			epoch += rapid.Uint64Range(1, 3).Draw(t, "epoch step")
			from := rapid.Uint64Range(1, done+1).Draw(t, "from")
			to := rapid.Uint64Range(max(from, done+1), n).Draw(t, "to")
			for s := from; s <= to; s++ {
				attempt := 1
				if s <= done {
					attempt = 2
				}
				recs = append(recs, record{handled{"k", s, attempt}, epoch, "m"})
			}
			done = to
		}
		r := checkEpochs(recs, []string{"k"}, n)
		if r.violations != 0 || r.lost != 0 || r.firstTry != 0 || r.stale != 0 {
			t.Fatalf("clean epochs reported %+v", r)
		}
		if recs[len(recs)-1].epoch == recs[0].epoch {
			return // one epoch: nothing older to put late
		}
		old := recs[0]
		recs = append(recs, old)
		if r := checkEpochs(recs, []string{"k"}, n); r.stale != 1 {
			t.Fatalf("a late record of epoch %d was not caught: %+v", old.epoch, r)
		}
	})
}
