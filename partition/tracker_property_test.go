package partition_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/testkit"
)

// Random interleavings of Track (with random gaps, and out-of-order
// attempts), Finish and Discard of pending and arbitrary positions, and
// Reset: the tracker equals the model after every step, its prefix is a
// prefix of what finished, and it never decreases between Resets. The model
// and the steps are testkit's, shared with the broker bindings' tests.
func TestTrackerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { testkit.CheckTracker(rt, new(partition.Tracker), nil) })
}

// Every completion order of a random run of positions with random gaps: after
// each Finish the prefix is the highest delivered position with every
// delivered position up to it finished, and a position finished a second
// time is refused.
func TestPrefixUnderAnyCompletionOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { testkit.CheckPrefixUnderAnyCompletionOrder(rt, new(partition.Tracker)) })
}
