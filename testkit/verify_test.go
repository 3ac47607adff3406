package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

var errBoom = errors.New("boom")

func TestVerifyPasses(t *testing.T) {
	ctx := t.Context()
	even := func(v int) bool { return v%2 == 0 }
	cases := map[string]*testkit.Verifier[int]{
		"next":           testkit.Verify(t, flux.Just(1, 2, 3)).ExpectNext(1, 2, 3).ExpectComplete(),
		"count":          testkit.Verify(t, flux.Range(0, 1000)).ExpectNext(0).ExpectNextCount(999).ExpectComplete(),
		"matches":        testkit.Verify(t, flux.Just(4)).ExpectNextMatches(even).ExpectComplete(),
		"consume while":  testkit.Verify(t, flux.Just(2, 4, 5, 6)).ThenConsumeWhile(even).ExpectNext(5, 6).ExpectComplete(),
		"while none":     testkit.Verify(t, flux.Just(1)).ThenConsumeWhile(even).ExpectNext(1).ExpectComplete(),
		"while to end":   testkit.Verify(t, flux.Just(2, 4)).ThenConsumeWhile(even).ExpectComplete(),
		"error":          testkit.Verify(t, flux.Error[int](errBoom)).ExpectError(),
		"error is":       testkit.Verify(t, flux.Just(1).DoOnComplete(func() {}).OnErrorResume(nil)).ExpectErrorIs(flux.ErrInvalidArgument),
		"cancel":         testkit.Verify(t, flux.Range(0, 1<<30)).ExpectNext(0, 1).ThenCancel(),
		"cancel at once": testkit.Verify(t, flux.Range(0, 1<<30)).ThenCancel(),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) { require.NoError(t, v.Verify(ctx)) })
	}
}

func TestVerifyNamesFirstMismatch(t *testing.T) {
	ctx := t.Context()
	cases := map[string]struct {
		v    *testkit.Verifier[int]
		want string
	}{
		"wrong value":         {testkit.Verify(t, flux.Just(1, 2, 3)).ExpectNext(1, 5, 3).ExpectComplete(), "signal 1: got onNext(2), expected onNext(5)"},
		"too few":             {testkit.Verify(t, flux.Just(1)).ExpectNext(1, 2).ExpectComplete(), "signal 1: got onComplete, expected onNext(2)"},
		"too many":            {testkit.Verify(t, flux.Just(1, 2)).ExpectNext(1).ExpectComplete(), "signal 1: got onNext(2), expected onComplete"},
		"count short":         {testkit.Verify(t, flux.Range(0, 3)).ExpectNextCount(4).ExpectComplete(), "signal 3: got onComplete, expected 4 more onNext"},
		"no match":            {testkit.Verify(t, flux.Just(3)).ExpectNextMatches(func(v int) bool { return v > 5 }).ExpectComplete(), "signal 0: got onNext(3), expected onNext matching"},
		"error not complete":  {testkit.Verify(t, flux.Error[int](errBoom)).ExpectComplete(), "signal 0: got onError(boom), expected onComplete"},
		"complete not error":  {testkit.Verify(t, flux.Just(1)).ExpectNext(1).ExpectError(), "signal 1: got onComplete, expected onError"},
		"other error":         {testkit.Verify(t, flux.Error[int](errBoom)).ExpectErrorIs(context.Canceled), "signal 0: got onError(boom), expected onError matching context canceled"},
		"ended before cancel": {testkit.Verify(t, flux.Just(1)).ExpectNext(1).ExpectNext(2).ThenCancel(), "signal 1: got onComplete, expected onNext(2)"},
		"no terminal":         {testkit.Verify(t, flux.Just(1)).ExpectNext(1), "no terminal step"},
		"after terminal":      {testkit.Verify(t, flux.Just(1)).ExpectComplete().ExpectNext(1), "after the terminal step"},
		"two terminals":       {testkit.Verify(t, flux.Just(1)).ExpectComplete().ThenCancel(), "two terminal steps"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.v.Verify(ctx)
			require.Error(t, err)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A flow that never ends fails on the virtual clock inside a bubble.
func TestVerifyTimesOutInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan int)
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		err := testkit.Verify(t, flux.FromChannel(never)).ExpectNext(1).ExpectComplete().Verify(ctx)
		require.ErrorContains(t, err, "signal 0: got no signal before the context ended (context deadline exceeded), expected onNext(1)")
	})
}

func TestVerifyTFailsTheTest(t *testing.T) {
	rec := &recordingTB{TB: t}
	testkit.Verify[int](rec, flux.Just(1)).ExpectNext(2).ExpectComplete().VerifyT()
	require.True(t, rec.failed)
	require.Contains(t, rec.msg, "expected onNext(2)")

	rec = &recordingTB{TB: t}
	testkit.Verify[int](rec, flux.Just(1)).ExpectNext(1).ExpectComplete().VerifyT()
	require.False(t, rec.failed)
}

// recordingTB records Fatal instead of stopping the test: the last message
// in msg, all of them in msgs.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
	msgs   []string
}

func (r *recordingTB) Fatal(args ...any) {
	r.failed = true
	r.msg = args[0].(error).Error()
	r.msgs = append(r.msgs, r.msg)
}

func (r *recordingTB) Helper() {}

func ExampleVerify() {
	t := &testing.T{} // in a test, the test's own *testing.T
	err := testkit.Verify(t, flux.Map(flux.Range(1, 3), func(v int) int { return v * 10 })).
		ExpectNext(10, 20).
		ExpectNextCount(1).
		ExpectComplete().
		Verify(context.Background())
	fmt.Println(err)
	// Output: <nil>
}
