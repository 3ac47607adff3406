package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// outcome is one run of the program.
type outcome struct {
	code           int
	stdout, stderr string
}

// runWith runs the program; dispatching, when set, is called once the
// dispatcher started and may send on interrupt.
func runWith(t *testing.T, args []string, dispatching func(interrupt chan<- os.Signal)) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	interrupt := make(chan os.Signal, 2)
	e := env{stdout: &stdout, stderr: &stderr, interrupt: interrupt}
	if dispatching != nil {
		e.dispatching = func() { dispatching(interrupt) }
	}
	code := run(args, e)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
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
	} {
		out := runWith(t, args, nil)
		require.Equal(t, exitOK, out.code, "%v: %s", args, out.stderr)
		s := decodeSummary(t, out)
		assert.False(t, s.Partial)
		assert.Equal(t, int64(20_000), s.Rows)
		assert.Equal(t, 224, s.Airports)
		assert.Equal(t, counts{Received: 20_000, Succeeded: 20_000}, s.Exchanges)
		assert.Zero(t, s.Lost)
		assert.Zero(t, s.Violations)
		assert.Equal(t, verified, s.Verification)
		assert.Empty(t, s.Difference)
		if assert.Len(t, s.Busiest, busiestShown) {
			assert.Equal(t, "DFW", s.Busiest[0].Airport)
			assert.Equal(t, int64(1_103), s.Busiest[0].Departures)
			assert.Equal(t, "ORD", s.Busiest[1].Airport)
		}
		assert.Positive(t, s.QueueWait.P99)
		assert.GreaterOrEqual(t, s.QueueWait.P99, s.QueueWait.P50)
		assert.Positive(t, s.Handling.P99)
	}
}

func TestTextSummary(t *testing.T) {
	out := runWith(t, nil, nil)
	require.Equal(t, exitOK, out.code, out.stderr)
	for _, want := range []string{
		"embedded flights-20k.json: 20,000 rows, 224 airports",
		"received 20,000, handled 20,000, failed 0, discarded 0, in flight 0",
		"lost        0", "violations  0", "busiest 10 airports", "DFW       1,103",
	} {
		assert.Contains(t, out.stdout, want)
	}
	assert.True(t, strings.HasSuffix(out.stdout, "\nverified\n"), out.stdout)
	assert.NotContains(t, out.stdout, "PARTIAL")
}

// slow makes the replay last about 20 s unless interrupted: 20,000
// exchanges of 1 ms on one goroutine, through few groups so that a graceful
// drain has little to finish.
var slow = []string{"-json", "-handler-cost", "1ms", "-pool", "1", "-parallelism", "4"}

// interrupted runs the slow replay with n interrupts sent as soon as it
// started, and checks what every partial run shows: exit status 130, the
// summary marked partial, intake stopped early, every admitted exchange
// ended exactly once, no verification.
func interrupted(t *testing.T, n int) summary {
	t.Helper()
	out := runWith(t, slow, func(interrupt chan<- os.Signal) {
		for range n {
			interrupt <- os.Interrupt
		}
	})
	require.Equal(t, exitInterrupted, out.code, out.stderr)
	s := decodeSummary(t, out)
	assert.True(t, s.Partial)
	assert.Equal(t, n > 1, s.Forced)
	assert.Equal(t, skipped, s.Verification)
	c := s.Exchanges
	assert.Less(t, c.Received, int64(20_000), "the stop ended the intake")
	assert.Equal(t, c.Received, c.Succeeded+c.Failed+c.Discarded, "every admitted exchange ended once")
	assert.Zero(t, c.InFlight)
	assert.Zero(t, s.Lost)
	assert.Equal(t, s.Rows-c.Received, s.Undelivered)
	return s
}

func TestInterruptDrains(t *testing.T) {
	s := interrupted(t, 1)
	c := s.Exchanges
	assert.Zero(t, c.Failed)
	// The flight the source was emitting as the intake closed is counted and
	// discarded (dispatch.ErrStopped); everything admitted before is handled.
	assert.LessOrEqual(t, c.Discarded, int64(1), "only the flight in the source's hand is dropped")
	assert.Equal(t, c.Received-c.Discarded, c.Succeeded, "a graceful drain handles everything admitted")
	assert.Zero(t, s.Violations)

	text := runWith(t, slow[1:], func(interrupt chan<- os.Signal) { interrupt <- os.Interrupt })
	assert.True(t, strings.HasPrefix(text.stdout, "PARTIAL: interrupted and drained gracefully"), text.stdout)
	assert.Contains(t, text.stdout, "verification skipped")
	assert.NotContains(t, text.stdout, "\nverified\n")
}

func TestSecondInterruptForces(t *testing.T) {
	interrupted(t, 2)
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
	} {
		out := runWith(t, []string{"-input", tc.path}, nil)
		assert.Equal(t, exitFailed, out.code, tc.path)
		assert.Empty(t, out.stdout, "no summary for bad input")
		for _, want := range tc.want {
			assert.Contains(t, out.stderr, want)
		}
		assert.Equal(t, 1, strings.Count(out.stderr, "flightdata:"), "one package prefix: %s", out.stderr)
	}
}

func TestHelpIsNotAFailure(t *testing.T) {
	out := runWith(t, []string{"-help"}, nil)
	assert.Equal(t, exitOK, out.code)
	assert.Contains(t, out.stderr, "usage: flights")
	assert.Empty(t, out.stdout)
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-parallelism", "0"}, {"-pool", "-1"}, {"-handler-cost", "-1s"}, {"-nope"}, {"extra"},
	} {
		out := runWith(t, args, nil)
		assert.Equal(t, exitUsage, out.code, "%v", args)
		assert.Empty(t, out.stdout)
		assert.Contains(t, out.stderr, "usage: flights", "%v", args)
	}
}

func TestInputFiles(t *testing.T) {
	json := `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 00:50","delay":-3,"distance":1750,"origin":"LAS","destination":"DTW"},
	{"date":"2001/01/01 01:47","delay":0,"distance":1750,"origin":"DTW","destination":"LAS"}]`
	out := runWith(t, []string{"-json", "-input", writeInput(t, "three.json", json)}, nil)
	require.Equal(t, exitOK, out.code, out.stderr)
	s := decodeSummary(t, out)
	assert.Equal(t, int64(3), s.Rows)
	assert.Equal(t, 2, s.Airports)
	assert.Equal(t, verified, s.Verification)
	assert.Equal(t, "DTW", s.Busiest[0].Airport)
	assert.Equal(t, int64(1), s.Busiest[0].LongestOnTimeRun)
}

// TestInputOutOfOrder: departures that go back in time are counted as
// violations, by the sequential fold too, and fail the run.
func TestInputOutOfOrder(t *testing.T) {
	json := `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 00:40","delay":-3,"distance":1750,"origin":"DTW","destination":"ORD"}]`
	out := runWith(t, []string{"-json", "-input", writeInput(t, "backwards.json", json)}, nil)
	assert.Equal(t, exitFailed, out.code)
	s := decodeSummary(t, out)
	assert.Equal(t, int64(1), s.Violations)
	assert.Equal(t, verified, s.Verification, "the dispatcher saw the input's own order")
}

func TestInterruptWhileDecoding(t *testing.T) {
	var stdout, stderr bytes.Buffer
	interrupt := make(chan os.Signal, 1)
	interrupt <- os.Interrupt
	code := run(nil, env{stdout: &stdout, stderr: &stderr, interrupt: interrupt})
	assert.Equal(t, exitInterrupted, code)
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), "interrupted while decoding")
}
