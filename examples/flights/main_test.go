package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// childEnv, set in the environment, makes the test binary run the program
// itself (see signal_test.go), writing handlingMarker on stderr once
// signalAfter exchanges were handled.
const (
	childEnv       = "FLIGHTS_TEST_RUN_PROGRAM"
	handlingMarker = "flights test: handling"
)

// signalAfter is the number of exchanges handled before the tests signal a
// replay: the stop then comes in the middle of the run, with work admitted.
const signalAfter = 3

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		var n atomic.Int64
		os.Exit(runProcess(func() {
			if n.Add(1) == signalAfter {
				fmt.Fprintln(os.Stderr, handlingMarker)
			}
		}))
	}
	goleak.VerifyTestMain(m)
}

// outcome is one run of the program.
type outcome struct {
	code           int
	stdout, stderr string
}

// runWith runs the program; signal, when set, is called once signalAfter
// exchanges were handled and may send up to two signals on interrupt.
func runWith(t *testing.T, args []string, signal func(interrupt chan<- os.Signal)) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	interrupt := make(chan os.Signal, 2)
	e := env{Env: job.Env{Stdout: &stdout, Stderr: &stderr, Interrupt: interrupt}}
	if signal != nil {
		var n atomic.Int64
		e.handled = func() {
			if n.Add(1) == signalAfter {
				signal(interrupt)
			}
		}
	}
	code := run(args, e)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// summary is the JSON summary, its read_back -source rxgo's.
type summary struct {
	job.Summary
	ReadBack *readBackSummary `json:"read_back"`
}

func decodeSummary(t *testing.T, out outcome) summary {
	t.Helper()
	var s summary
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &s), "stdout: %s\nstderr: %s", out.stdout, out.stderr)
	return s
}

// TestEmbeddedSample is the program's own check, end to end: the embedded
// sample goes through the dispatcher with nothing lost, no ordering
// violation, and every airport's state equal to the sequential fold.
func TestEmbeddedSample(t *testing.T) {
	for _, args := range [][]string{
		{"-json"},
		{"-json", "-parallelism", "1", "-pool", "1"},
		{"-json", "-parallelism", "7", "-pool", "3", "-handler-cost", "1us"},
		{"-json", "-source", "rxgo"},
		{"-json", "-source", "rxgo", "-parallelism", "1", "-pool", "1", "-max-pending", "1"},
		{"-json", "-source", "rxgo", "-parallelism", "7", "-pool", "3", "-handler-cost", "1us"},
	} {
		out := runWith(t, args, nil)
		require.Equal(t, job.ExitOK, out.code, "%v: %s", args, out.stderr)
		s := decodeSummary(t, out)
		if slices.Contains(args, "rxgo") {
			assert.Equal(t, "rxgo", s.Source)
			assert.Equal(t, &readBackSummary{Read: 20_000, Agrees: true}, s.ReadBack, "every outcome read back")
		} else {
			assert.Equal(t, "flux", s.Source)
			assert.Nil(t, s.ReadBack)
		}
		assert.Empty(t, s.Error)
		assert.False(t, s.Partial)
		assert.Equal(t, int64(20_000), s.Rows)
		assert.Equal(t, 220, s.Airports, "origins")
		assert.Equal(t, 224, s.AirportsNamed, "origins and destinations")
		assert.Equal(t, s.Airports, s.Aggregates, "one aggregate per origin airport")
		assert.Equal(t, job.Counts{Received: 20_000, Succeeded: 20_000}, s.Exchanges)
		assert.Zero(t, s.Lost)
		assert.Zero(t, s.Violations)
		assert.Equal(t, job.Verified, s.Verification)
		assert.Empty(t, s.Difference)
		if assert.Len(t, s.Busiest, 10) {
			assert.Equal(t, "DFW", s.Busiest[0].Airport)
			assert.Equal(t, int64(1_103), s.Busiest[0].Departures)
			assert.Equal(t, "ORD", s.Busiest[1].Airport)
		}
		assert.Positive(t, s.QueueWait.P99)
		assert.GreaterOrEqual(t, s.QueueWait.P99, s.QueueWait.P50)
		assert.Positive(t, s.Handling.P99)
	}
}

func containsAll(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		assert.Contains(t, text, want)
	}
}

func TestTextSummary(t *testing.T) {
	out := runWith(t, nil, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	containsAll(t, out.stdout,
		"embedded flights-20k.json.gz: 20,000 flights from 220 airports (and 4 airports that are only destinations)",
		"aggregates  220 handled, one per origin airport (flights.Airport)",
		"dispatcher  128 groups, 2 scheduler goroutines",
		"received 20,000, handled 20,000, failed 0, discarded 0, in flight 0",
		"lost        0", "violations  0", "busiest 10 airports", "DFW       1,103")
	assert.True(t, strings.HasSuffix(out.stdout, "\nverified\n"), out.stdout)
	assert.NotContains(t, out.stdout, "PARTIAL")
	assert.Contains(t, out.stdout, "\nsource      flux (flux.FromSeq), outcomes from the dispatcher's Stats\n")

	out = runWith(t, []string{"-source", "rxgo"}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	containsAll(t, out.stdout, "\nsource      rxgo (rxgo.Defer through flux.FromObservable), "+
		"20,000 outcomes read back through Results.Observable, agreeing with Stats\n",
		"received 20,000, handled 20,000, failed 0, discarded 0, in flight 0", "\nverified\n")
}

// slowRows is the length of the slow replay's input.
const slowRows = 1_000

// slow returns the arguments of a replay that lasts 20 s unless
// interrupted: 1,000 flights from 5 airports, each exchange costing 20 ms on
// one goroutine, through few groups and a small budget so that a graceful
// drain has little to finish.
func slow(t *testing.T) []string {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	for i := range slowRows {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"date":"2001/01/%02d %02d:%02d","delay":%d,"distance":100,"origin":"A%d","destination":"B"}`,
			1+i/1440, i/60%24, i%60, i%7-3, i%5)
	}
	b.WriteString("]")
	return []string{"-json", "-input", writeInput(t, "slow.json", b.String()),
		"-handler-cost", "20ms", "-pool", "1", "-parallelism", "4", "-max-pending", "4"}
}

// interrupted runs the slow replay with the signals sent after signalAfter
// exchanges, and checks what every partial run shows: the exit status of the
// first signal, the summary marked partial, intake stopped early, every
// admitted exchange ended exactly once, no verification.
func interrupted(t *testing.T, signals ...os.Signal) summary {
	t.Helper()
	return interruptedWith(t, nil, signals...)
}

// interruptedWith is interrupted with more arguments for the slow replay.
func interruptedWith(t *testing.T, more []string, signals ...os.Signal) summary {
	t.Helper()
	out := runWith(t, append(slow(t), more...), func(interrupt chan<- os.Signal) {
		for _, sig := range signals {
			interrupt <- sig
		}
	})
	s := decodeSummary(t, out)
	checkPartial(t, out.code, s, signals[0], len(signals) > 1)
	return s
}

// checkPartial checks the summary s of a run stopped by sig, forced or not,
// that exited with code.
func checkPartial(t *testing.T, code int, s summary, sig os.Signal, forced bool) {
	t.Helper()
	assert.Equal(t, job.SignalStatus(sig), code)
	assert.True(t, s.Partial)
	assert.Equal(t, job.SignalName(sig), s.Signal)
	assert.Equal(t, forced, s.Forced)
	assert.Equal(t, job.Skipped, s.Verification)
	c := s.Exchanges
	assert.Less(t, c.Received, int64(slowRows), "the stop ended the intake")
	assert.GreaterOrEqual(t, c.Succeeded, int64(signalAfter), "handled before the signal")
	assert.Equal(t, c.Received, c.Succeeded+c.Failed+c.Discarded, "every admitted exchange ended once")
	assert.Zero(t, c.InFlight)
	assert.Zero(t, s.Lost)
	assert.Equal(t, s.Rows-c.Received, s.Undelivered)
}

func TestInterruptDrains(t *testing.T) {
	s := interrupted(t, os.Interrupt)
	c := s.Exchanges
	assert.Zero(t, c.Failed)
	// The flight the source was emitting as the intake closed is counted and
	// discarded (dispatch.ErrStopped); everything admitted before is handled.
	assert.LessOrEqual(t, c.Discarded, int64(1), "only the flight in the source's hand is dropped")
	assert.Equal(t, c.Received-c.Discarded, c.Succeeded, "a graceful drain handles everything admitted")
	assert.Zero(t, s.Violations)

	text := runWith(t, slow(t)[1:], func(interrupt chan<- os.Signal) { interrupt <- syscall.SIGTERM })
	assert.Equal(t, job.ExitTerminated, text.code)
	assert.True(t, strings.HasPrefix(text.stdout, "PARTIAL: interrupted by SIGTERM and drained gracefully after "), text.stdout)
	assert.Contains(t, text.stdout, " of 1,000 flights; these figures are not a complete run\n")
	assert.Contains(t, text.stdout, "verification skipped")
	assert.NotContains(t, text.stdout, "\nverified\n")
}

func TestTerminateDrains(t *testing.T) {
	s := interrupted(t, syscall.SIGTERM)
	assert.Equal(t, s.Exchanges.Received-s.Exchanges.Discarded, s.Exchanges.Succeeded)
}

// TestSecondSignalForces: a second signal forces the stop (the same one
// again forces too, unless it comes within repeatWithin: see TestAwait);
// the first sets the exit status.
func TestSecondSignalForces(t *testing.T) {
	interrupted(t, os.Interrupt, syscall.SIGTERM)
	interrupted(t, syscall.SIGTERM, os.Interrupt)
}

// TestInterruptRxgo: under -source rxgo a stop ends the Observable's
// producer too (no goroutine is left once the run returned), every outcome
// is read back or counted as dropped, and they agree with Stats; a graceful
// drain drops none.
func TestInterruptRxgo(t *testing.T) {
	rxgo := []string{"-source", "rxgo"}
	s := interruptedWith(t, rxgo, os.Interrupt)
	assert.Equal(t, s.Exchanges.Received-s.Exchanges.Discarded, s.Exchanges.Succeeded)
	assert.Equal(t, &readBackSummary{Read: s.Exchanges.Received, Agrees: true}, s.ReadBack)
	assert.Empty(t, s.Error)
	goleak.VerifyNone(t)

	s = interruptedWith(t, rxgo, syscall.SIGTERM, os.Interrupt)
	if assert.NotNil(t, s.ReadBack) {
		assert.True(t, s.ReadBack.Agrees)
		assert.Equal(t, s.Exchanges.Received, s.ReadBack.Read+s.ReadBack.Dropped)
	}
	assert.Empty(t, s.Error)
	goleak.VerifyNone(t)
}

func writeInput(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestBadInput: exit status 1, an error naming the file (and the row), and
// no summary at all.
func TestBadInput(t *testing.T) {
	good := `{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`
	bad := `{"date":"2001/01/01 25:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`
	for _, tc := range []struct {
		path string
		want []string
	}{
		{writeInput(t, "bad-row.json", "["+good+","+good+","+bad+"]"), []string{"bad-row.json", "row 3", "bad date"}},
		{writeInput(t, "flights.csv", "date,delay\n"), []string{"flights.csv", "unknown input format"}},
		{writeInput(t, "corrupt.parquet", "not parquet at all"), []string{"corrupt.parquet"}},
		{filepath.Join(t.TempDir(), "absent.json"), []string{"absent.json", "no such file"}},
		{t.TempDir(), []string{"is a directory (want a .json, .json.gz or .parquet file)"}},
	} {
		out := runWith(t, []string{"-input", tc.path}, nil)
		assert.Equal(t, job.ExitFailed, out.code, tc.path)
		assert.Empty(t, out.stdout, "no summary for bad input")
		for _, want := range tc.want {
			assert.Contains(t, out.stderr, want)
		}
		assert.Equal(t, 1, strings.Count(out.stderr, "flightdata:"), "one package prefix: %s", out.stderr)
	}
}

func TestHelpIsNotAFailure(t *testing.T) {
	out := runWith(t, []string{"-help"}, nil)
	assert.Equal(t, job.ExitOK, out.code)
	assert.Contains(t, out.stderr, "usage: flights")
	assert.Empty(t, out.stdout)
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-parallelism", "0"}, {"-pool", "-1"}, {"-handler-cost", "-1s"}, {"-max-pending", "0"},
		{"-progress", "sometimes"}, {"-nope"}, {"extra"}, {"-source", "kafka"},
		{"-metrics-hold", "1s"}, {"-metrics", "127.0.0.1:0", "-metrics-hold", "-1s"},
	} {
		out := runWith(t, args, nil)
		assert.Equal(t, job.ExitUsage, out.code, "%v", args)
		assert.Empty(t, out.stdout)
		assert.Contains(t, out.stderr, "usage: flights", "%v", args)
	}
}

// TestSourceJetstreamMoved: -source jetstream is a module of its own now,
// so that the in-process job does not build the broker: asking for it here
// says where it went.
func TestSourceJetstreamMoved(t *testing.T) {
	out := runWith(t, []string{"-source", "jetstream"}, nil)
	assert.Equal(t, job.ExitUsage, out.code)
	assert.Empty(t, out.stdout)
	assert.Contains(t, out.stderr, "flights: -source jetstream is a program of its own: go run ./examples/flights/jetstream")
	assert.Contains(t, out.stderr, "usage: flights")
}

func TestInputFiles(t *testing.T) {
	json := `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 00:50","delay":-3,"distance":1750,"origin":"LAS","destination":"DTW"},
	{"date":"2001/01/01 01:47","delay":0,"distance":1750,"origin":"DTW","destination":"LAS"}]`
	out := runWith(t, []string{"-json", "-input", writeInput(t, "three.json", json)}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	s := decodeSummary(t, out)
	assert.Equal(t, int64(3), s.Rows)
	assert.Equal(t, 2, s.Airports)
	assert.Equal(t, 2, s.Aggregates)
	assert.Equal(t, job.Verified, s.Verification)
	assert.Equal(t, "DTW", s.Busiest[0].Airport)
	assert.Equal(t, int64(1), s.Busiest[0].LongestOnTimeRun)
}

// TestInputOutOfOrder: departures that go back in time are counted as
// violations, by the sequential fold too, and fail the run.
func TestInputOutOfOrder(t *testing.T) {
	json := `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 00:40","delay":-3,"distance":1750,"origin":"DTW","destination":"ORD"}]`
	out := runWith(t, []string{"-json", "-input", writeInput(t, "backwards.json", json)}, nil)
	assert.Equal(t, job.ExitFailed, out.code)
	s := decodeSummary(t, out)
	assert.Equal(t, int64(1), s.Violations)
	assert.Equal(t, job.Verified, s.Verification, "the dispatcher saw the input's own order")
}

func TestInterruptWhileDecoding(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		var stdout, stderr bytes.Buffer
		interrupt := make(chan os.Signal, 1)
		interrupt <- sig
		code := run(nil, env{Env: job.Env{Stdout: &stdout, Stderr: &stderr, Interrupt: interrupt}})
		assert.Equal(t, job.SignalStatus(sig), code)
		assert.Empty(t, stdout.String())
		assert.Equal(t, "flights: interrupted by "+job.SignalName(sig)+" while decoding; nothing was dispatched\n", stderr.String())
	}
}

// TestUnknownField: a field beyond the five is skipped, and fails the run
// under -strict.
func TestUnknownField(t *testing.T) {
	path := writeInput(t, "extra.json",
		`[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS","carrier":"NW"}]`)
	out := runWith(t, []string{"-json", "-input", path}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	assert.Equal(t, int64(1), decodeSummary(t, out).Rows)

	out = runWith(t, []string{"-strict", "-input", path}, nil)
	assert.Equal(t, job.ExitFailed, out.code)
	assert.Empty(t, out.stdout)
	assert.Equal(t, "flightdata: "+path+`: row 1: unknown field "carrier"`+"\n", out.stderr)
}

const oneFlight = `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}]`

// TestPlurals: one of a thing is said in the singular on every line.
func TestPlurals(t *testing.T) {
	out := runWith(t, []string{"-input", writeInput(t, "one.json", oneFlight), "-parallelism", "1", "-pool", "1"}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	containsAll(t, out.stdout,
		": 1 flight from 1 airport (and 1 airport that is only a destination)\n",
		"aggregates  1 handled",
		"dispatcher  1 group, 1 scheduler goroutine, handler cost 0s",
		"\nbusiest 1 airport\n")
	for _, wrong := range []string{"1 flights", "1 airports", "1 groups", "1 scheduler goroutines"} {
		assert.NotContains(t, out.stdout, wrong)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0 flights", 1: "1 flight", 2: "2 flights", 3_000_000: "3,000,000 flights", -1: "-1 flights"} {
		assert.Equal(t, want, job.Count(n, "flight"))
	}
}

// TestProgressFlag: -progress always draws the decoding and dispatching
// bars on stderr even when it is not a terminal, while stdout keeps the
// summary; the input is the embedded sample's own .json.gz file, which
// -input takes as it is.
func TestProgressFlag(t *testing.T) {
	out := runWith(t, []string{"-json", "-progress", "always", "-input", filepath.Join("data", "flights-20k.json.gz")}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	assert.Contains(t, out.stderr, "decoding")
	assert.Contains(t, out.stderr, "dispatching")
	s := decodeSummary(t, out)
	assert.Equal(t, int64(20_000), s.Rows)
	assert.Equal(t, 220, s.Aggregates)
	assert.Equal(t, job.Verified, s.Verification)

	out = runWith(t, []string{"-json", "-input", writeInput(t, "one.json", oneFlight)}, nil)
	require.Equal(t, job.ExitOK, out.code, out.stderr)
	assert.Empty(t, out.stderr, "no bar by default on what is not a terminal")
}
