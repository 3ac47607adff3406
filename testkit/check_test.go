package testkit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

func call(key string, seq, group int, start, end int64) testkit.Call {
	return testkit.Call{Tag: testkit.Tag{Key: key, Seq: seq, Group: group}, Start: start, End: end}
}

func TestPerKeyFIFO(t *testing.T) {
	ok := []testkit.Call{call("a", 0, 0, 1, 2), call("b", 0, 0, 3, 4), call("a", 2, 0, 5, 6)} // gap allowed
	assert.NoError(t, testkit.PerKeyFIFO(ok))
	assert.NoError(t, testkit.PerKeyFIFO(nil))

	swapped := []testkit.Call{call("a", 1, 0, 1, 2), call("a", 0, 0, 3, 4)}
	assert.ErrorContains(t, testkit.PerKeyFIFO(swapped), `key "a": seq 0 started (tick 3) after seq 1`)
	twice := []testkit.Call{call("a", 0, 0, 1, 2), call("a", 0, 0, 3, 4)}
	assert.Error(t, testkit.PerKeyFIFO(twice))
}

func TestGroupSerial(t *testing.T) {
	ok := []testkit.Call{call("a", 0, 1, 1, 2), call("b", 0, 1, 3, 4), call("c", 0, 2, 2, 5)}
	assert.NoError(t, testkit.GroupSerial(ok), "different groups may overlap")

	overlap := []testkit.Call{call("a", 0, 1, 1, 4), call("b", 0, 1, 2, 3)}
	assert.ErrorContains(t, testkit.GroupSerial(overlap), `group 1: "b" seq 0 started (tick 2) before "a" seq 0 returned (tick 4)`)
}

func TestCheckersNameTheFirstViolation(t *testing.T) {
	calls := []testkit.Call{
		call("late", 1, 1, 10, 11), call("late", 0, 1, 12, 13),
		call("early", 1, 2, 3, 4), call("early", 0, 2, 5, 6),
	}
	assert.ErrorContains(t, testkit.PerKeyFIFO(calls), `key "early"`)
}

func TestNoLoss(t *testing.T) {
	calls := []testkit.Call{call("a", 0, 0, 1, 2), call("a", 1, 0, 3, 4)}
	good := dispatch.Stats{Received: 5, Succeeded: 1, Failed: 1, Discarded: 3}
	assert.NoError(t, testkit.NoLoss(5, good, calls))

	// A loss: the source emitted one exchange the dispatcher never counted.
	assert.ErrorContains(t, testkit.NoLoss(6, good, calls), "the source emitted 6 exchanges, the dispatcher received 5")
	inFlight := dispatch.Stats{Received: 3, Succeeded: 1, Failed: 1, InFlight: 1}
	assert.ErrorContains(t, testkit.NoLoss(3, inFlight, calls), "1 exchanges still in flight")
	// A double handling: one exchange's handler ran twice.
	twice := []testkit.Call{call("a", 0, 0, 1, 2), call("a", 0, 0, 3, 4)}
	assert.ErrorContains(t, testkit.NoLoss(2, dispatch.Stats{Received: 2, Succeeded: 2}, twice), `key "a" seq 0 handled twice`)
	assert.ErrorContains(t, testkit.NoLoss(3, dispatch.Stats{Received: 3, Succeeded: 3}, calls), "2 handler calls recorded, but stats count 3 handled")
}

// randomCalls draws calls over few keys and groups with random intervals whose
// ticks are all distinct, as a Recorder's are.
func randomCalls(t *rapid.T) []testkit.Call {
	n := rapid.IntRange(0, 12).Draw(t, "n")
	ticks := make([]int64, 2*n)
	for i := range ticks {
		ticks[i] = int64(i)
	}
	ticks = rapid.Permutation(ticks).Draw(t, "ticks")
	calls := make([]testkit.Call, n)
	for i := range calls {
		start, end := min(ticks[2*i], ticks[2*i+1]), max(ticks[2*i], ticks[2*i+1])
		calls[i] = call(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key"),
			rapid.IntRange(0, 5).Draw(t, "seq"), rapid.IntRange(0, 2).Draw(t, "group"), start, end)
	}
	return calls
}

// The checkers agree with plain pairwise definitions on random call sets,
// violations included.
func TestCheckersMatchPairwiseDefinitions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		calls := randomCalls(t)
		fifo, serial := true, true
		for _, a := range calls {
			for _, b := range calls {
				if a.Key == b.Key && a.Start < b.Start && a.Seq >= b.Seq {
					fifo = false
				}
				if a.Group == b.Group && a.Start < b.Start && b.Start < a.End {
					serial = false
				}
			}
		}
		if got := testkit.PerKeyFIFO(calls) == nil; got != fifo {
			t.Fatalf("PerKeyFIFO says %v, the definition %v", got, fifo)
		}
		if got := testkit.GroupSerial(calls) == nil; got != serial {
			t.Fatalf("GroupSerial says %v, the definition %v", got, serial)
		}
	})
}
