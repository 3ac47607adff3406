package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A dynamic run interrupted (SIGINT) before b held its share, as
// `go run ./examples/flights/jetstream -assign dynamic` stopped half a second in: b
// never claimed a partition and the second half was never published, yet the
// assignment line says b "held its share 0.000 s later" and that half the
// flights were published after. The line of such a run must not claim a
// handoff that did not happen.
func TestAssignmentLineOfARunStoppedBeforeTheHandoff(t *testing.T) {
	b := brokerSummary{Partitions: 8, Assignment: "dynamic", LeaseTTL: leaseTTL,
		Members: []memberSummary{{Name: "a", Partitions: []int32{0, 1, 2}, Claims: 4, Releases: 4, Applied: 3_035}, {Name: "b"}}}
	line := b.assignmentLine()
	assert.NotContains(t, line, "held its share 0.000 s later", line)
	assert.NotContains(t, line, "half after", line)
}
