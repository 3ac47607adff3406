package testkit_test

import (
	"sync/atomic"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// groupsTaken is Reactor's groupBy example: 1..10 by v%3, two groups taken;
// the items of key 0 (3, 6, 9) are discarded.
func groupsTaken() flux.Flux[int] {
	return flux.FlatMap(flux.GroupBy(flux.Range(1, 10), func(v int) int { return v % 3 }, 3).Take(2),
		func(g flux.GroupedFlux[int]) flux.Flux[int] { return g.Flux }, 2)
}

func TestAssertionsOfDiscards(t *testing.T) {
	a := testkit.Verify(t, groupsTaken()).ExpectNextCount(7).ExpectComplete().VerifyT()
	a.HasDiscardedElements().HasDiscarded(9, 3).HasDiscardedExactly(3, 6, 9)
	require.ElementsMatch(t, []int{3, 6, 9}, a.Discarded())

	testkit.Verify(t, flux.Range(0, 3)).ExpectNextCount(3).ExpectComplete().VerifyT().HasNotDiscardedElements()
}

// Each failing assertion fails the test with a message naming what was
// found.
func TestAssertionsFail(t *testing.T) {
	cases := map[string]struct {
		check func(*testkit.Assertions[int])
		want  string
	}{
		"none expected":    {func(a *testkit.Assertions[int]) { a.HasNotDiscardedElements() }, "expected no discarded items, found"},
		"missing value":    {func(a *testkit.Assertions[int]) { a.HasDiscarded(3, 4) }, "expected discarded items to contain []int{3, 4}"},
		"twice":            {func(a *testkit.Assertions[int]) { a.HasDiscarded(3, 3) }, "to contain []int{3, 3}"},
		"no values":        {func(a *testkit.Assertions[int]) { a.HasDiscarded() }, "to contain []int(nil)"},
		"not exactly":      {func(a *testkit.Assertions[int]) { a.HasDiscardedExactly(3, 6) }, "to be exactly []int{3, 6}"},
		"exactly, missing": {func(a *testkit.Assertions[int]) { a.HasDiscardedExactly(3, 6, 9, 12) }, "to be exactly"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			a := testkit.Verify[int](rec, groupsTaken()).ExpectNextCount(7).ExpectComplete().VerifyT()
			require.False(t, rec.failed, rec.msg)
			c.check(a)
			require.True(t, rec.failed)
			require.Contains(t, rec.msg, testkit.ErrExpectation.Error())
			require.Contains(t, rec.msg, c.want)
		})
	}
	rec := &recordingTB{TB: t}
	testkit.Verify[int](rec, flux.Just(1)).ExpectNext(1).ExpectComplete().VerifyT().HasDiscardedElements()
	require.Equal(t, []string{"testkit: expectation failed: expected discarded items, none found"}, rec.msgs)
}

// A cancelled PublishOn discards what it had pulled and not delivered:
// every item pulled is either the one delivered or discarded.
func TestAssertionsAfterCancel(t *testing.T) {
	s, err := schedulers.NewSingle("assert")
	require.NoError(t, err)
	defer s.Dispose()
	for range 20 {
		var pulled atomic.Int64
		src := flux.Range(0, 1000).DoOnNext(func(int) { pulled.Add(1) })
		a := testkit.Verify(t, src.PublishOn(s, 8)).ExpectNext(0).ThenCancel().VerifyT()
		require.Equal(t, pulled.Load(), int64(1+len(a.Discarded())))
	}
}
