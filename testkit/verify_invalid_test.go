package testkit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

// An invalid script fails every run with ErrInvalidScript, whatever the
// Flux does, and never subscribes it.
func TestInvalidScripts(t *testing.T) {
	var subs atomic.Int32
	complete := subscribedTo(flux.Just(1), &subs)
	failing := subscribedTo(flux.Error[int](errBoom), &subs)
	cases := map[string]struct {
		v    *testkit.Verifier[int]
		want string
	}{
		"ErrorIs(nil) on a completing flow": {testkit.Verify(t, complete).ExpectNext(1).ExpectErrorIs(nil), "ExpectErrorIs(nil): an error expectation needs a target error"},
		"ErrorIs(nil) on a failing flow":    {testkit.Verify(t, failing).ExpectErrorIs(nil), "ExpectErrorIs(nil)"},
		"ErrorAs(nil)":                      {testkit.Verify(t, failing).ExpectErrorAs(nil), "the target must be a non-nil pointer"},
		"ErrorAs(non-pointer)":              {testkit.Verify(t, failing).ExpectErrorAs(codeError{}), "the target must be a non-nil pointer"},
		"ErrorAs(nil pointer)":              {testkit.Verify(t, failing).ExpectErrorAs((*error)(nil)), "the target must be a non-nil pointer"},
		"ErrorAs(*int)":                     {testkit.Verify(t, failing).ExpectErrorAs(new(int)), "*target must be an interface or implement error"},
		"negative count":                    {testkit.Verify(t, complete).ExpectNextCount(-1).ExpectComplete(), "ExpectNextCount(-1)"},
		"nil predicate":                     {testkit.Verify(t, complete).ExpectNextMatches(nil).ExpectComplete(), "ExpectNextMatches(nil)"},
		"nil while":                         {testkit.Verify(t, complete).ThenConsumeWhile(nil).ExpectComplete(), "ThenConsumeWhile(nil)"},
		"nil then":                          {testkit.Verify(t, complete).Then(nil).ExpectComplete(), "Then(nil)"},
		"nil consumer":                      {testkit.Verify(t, complete).RecordWith().ConsumeRecordedWith(nil).ExpectComplete(), "ConsumeRecordedWith(nil)"},
		"nil matcher":                       {testkit.Verify(t, complete).RecordWith().ExpectRecordedMatches(nil).ExpectComplete(), "ExpectRecordedMatches(nil)"},
		"consume without record":            {testkit.Verify(t, complete).ConsumeRecordedWith(func([]int) {}).ExpectComplete(), "consumeRecordedWith without a RecordWith"},
		"match without record":              {testkit.Verify(t, complete).ExpectRecordedMatches(func([]int) bool { return true }).ExpectComplete(), "expectRecordedMatches without a RecordWith"},
		"zero await":                        {testkit.Verify(t, complete).ThenAwait(0).ExpectComplete(), "ThenAwait(0s): not above zero"},
		"negative no-event":                 {testkit.Verify(t, complete).ExpectNoEvent(-time.Second).ExpectComplete(), "ExpectNoEvent(-1s)"},
		"zero timeout step":                 {testkit.Verify(t, complete).ExpectTimeout(0), "ExpectTimeout(0s)"},
		"zero Timeout":                      {testkit.Verify(t, complete).ExpectComplete().Timeout(0), "Timeout(0s)"},
		"step after ExpectTimeout":          {testkit.Verify(t, complete).ExpectTimeout(time.Hour).ExpectNext(1), "after the terminal step"},
		"only the first misuse is kept":     {testkit.Verify(t, complete).Then(nil).ExpectNextMatches(nil).ExpectComplete(), "Then(nil)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			invalidScript(t, c.v.Verify(t.Context()), c.want)
			a, err := c.v.VerifyThenAssertThat(t.Context())
			invalidScript(t, err, c.want)
			require.Empty(t, a.Discarded())
		})
	}
	require.Zero(t, subs.Load(), "an invalid script subscribed its Flux")
}

// VerifyT fails the test with the invalid script's error.
func TestVerifyTFailsAnInvalidScript(t *testing.T) {
	rec := &recordingTB{TB: t}
	testkit.Verify[int](rec, flux.Just(1)).ExpectNext(1).ExpectErrorIs(nil).VerifyT()
	require.True(t, rec.failed)
	require.Contains(t, rec.msg, "ExpectErrorIs(nil)")
}
