package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoBrokerInBuild: the in-process job compiles no broker client or
// server: NATS (nats.go, the embedded nats-server) is the JetStream
// module's, examples/flights/jetstream, and Kafka's is examples/flights/kafka.
func TestNoBrokerInBuild(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/aggflow/aggflow/dispatch", "the list is the job's")
	for _, p := range deps {
		for _, broker := range []string{"github.com/nats-io/", "github.com/twmb/franz-go", "github.com/aggflow/aggflow/source/"} {
			assert.False(t, strings.HasPrefix(p, broker), "the job builds %s", p)
		}
	}
}
