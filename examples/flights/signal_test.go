//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSignalled runs the program in a child process (this test binary,
// re-executed with childEnv) on the slow replay, sends it the signals by
// pid, one right after the other, once it says it handled signalAfter
// exchanges, and returns its exit status and summary.
func runSignalled(t *testing.T, signals ...syscall.Signal) (int, summary) {
	t.Helper()
	// The deadline only kills a child that hangs; nothing waits on it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], slow(t)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	lines := bufio.NewReader(stderr)
	var before strings.Builder
	for {
		line, err := lines.ReadString('\n')
		before.WriteString(line)
		if strings.TrimSpace(line) == handlingMarker {
			break
		}
		if err != nil {
			_ = cmd.Wait()
			t.Fatalf("the child ended before handling (%v); stderr: %s", err, before.String())
		}
	}
	for _, sig := range signals {
		require.NoError(t, syscall.Kill(cmd.Process.Pid, sig))
	}
	rest, err := io.ReadAll(lines) // until the child exits and closes stderr
	require.NoError(t, err)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s%s", before.String(), rest)

	var s summary
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &s), "stdout: %s\nstderr: %s", stdout.String(), rest)
	return exit.ExitCode(), s
}

// TestSignalsStopTheProcess: SIGTERM or SIGINT sent to the process drains
// it, and it exits 143 or 130 with a partial summary. SIGTERM twice at once,
// as timeout(1) sends it, still drains. (A second signal's force is tested
// in the process, by TestSecondSignalForces.)
func TestSignalsStopTheProcess(t *testing.T) {
	for _, tc := range []struct {
		signals []syscall.Signal
		status  int
	}{
		{[]syscall.Signal{syscall.SIGTERM}, 143},
		{[]syscall.Signal{syscall.SIGINT}, 130},
		{[]syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, 143},
	} {
		code, s := runSignalled(t, tc.signals...)
		assert.Equal(t, tc.status, code, tc.signals)
		checkPartial(t, code, s, tc.signals[0], false)
		c := s.Exchanges
		assert.Equal(t, c.Received-c.Discarded, c.Succeeded, "%v: a graceful drain handles everything admitted", tc.signals)
	}
}
