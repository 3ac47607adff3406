package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(consumerEnv); url != "" { // a consumer process: the test binary re-executed
		os.Exit(consumerMain(url, os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// runWith runs the program, with no signal, and returns its exit status
// and what it wrote.
func runWith(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, job.Env{Stdout: &out, Stderr: &errs, Interrupt: make(chan os.Signal)})
	return code, out.String(), errs.String()
}

// summary is the JSON summary, its broker this program's.
type summary struct {
	job.Summary
	Broker *brokerSummary `json:"broker"`
}

func containsAll(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		assert.Contains(t, text, want)
	}
}
