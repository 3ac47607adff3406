package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
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

// ThenCancel with no step before it subscribes the Flux, then cancels it:
// the Flux runs, with its context cancelled, and must end by that.
func TestThenCancelAtOnceSubscribes(t *testing.T) {
	var subs atomic.Int32
	var sawCancel atomic.Bool
	f := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		sawCancel.Store(true)
		return context.Cause(ctx)
	})
	require.NoError(t, testkit.Verify(t, subscribedTo(f, &subs)).ThenCancel().Verify(t.Context()))
	require.Equal(t, int32(1), subs.Load())
	require.True(t, sawCancel.Load())

	subs.Store(0)
	require.NoError(t, testkit.Verify(t, subscribedTo(flux.Range(0, 1<<30), &subs)).ThenCancel().Verify(t.Context()))
	require.Equal(t, int32(1), subs.Load())
}

// What the Flux does once subscribed counts: a flow that ends by itself
// before the cancel, or with an error of its own after it, fails the script.
func TestThenCancelChecksTheFlow(t *testing.T) {
	ignoresCancel := flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		<-ctx.Done()
		return errBoom
	})
	panics := flux.Map(flux.Just(1), func(int) int { panic("boom") })
	cases := map[string]struct {
		v     *testkit.Verifier[int]
		index int
		want  string
	}{
		"fails at once":     {testkit.Verify(t, flux.Error[int](errBoom)).ThenCancel(), 0, "got onError(boom) after the cancel, expected the cancellation"},
		"completes at once": {testkit.Verify(t, flux.Empty[int]()).ThenCancel(), 0, "got onComplete after the cancel"},
		"other error":       {testkit.Verify(t, ignoresCancel).ThenCancel(), 0, "got onError(boom) after the cancel"},
		"ended before":      {testkit.Verify(t, flux.Just(1, 2)).ThenConsumeWhile(func(int) bool { return true }).ThenCancel(), 2, "got onComplete, expected cancel"},
		"failed before":     {testkit.Verify(t, flux.Error[int](errBoom)).ExpectNoEvent(1).ThenCancel(), 0, "got onError(boom), expected no signal"},
		"value steps first": {testkit.Verify(t, flux.Just(1)).ExpectNext(2).ThenCancel(), 0, "got onNext(1), expected onNext(2)"},
		"too few before":    {testkit.Verify(t, flux.Just(1)).ExpectNext(1, 2).ThenCancel(), 1, "got onComplete, expected onNext(2)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { failsAt(t, c.v.Verify(t.Context()), c.index, c.want) })
	}
	// A Flux that would panic is cancelled before it starts.
	require.NoError(t, testkit.Verify(t, panics).ThenCancel().Verify(t.Context()))
}

// The cancel is the answer to the emit of the last item expected: a
// synchronous source pulls nothing more, and a flow that would have
// completed right after it is still cancelled.
func TestThenCancelStopsAtTheLastItem(t *testing.T) {
	var pulled atomic.Int64
	src := flux.Range(0, 1<<30).DoOnNext(func(int) { pulled.Add(1) })
	require.NoError(t, testkit.Verify(t, src).ExpectNext(0, 1).ThenCancel().Verify(t.Context()))
	require.Equal(t, int64(2), pulled.Load())
	require.NoError(t, testkit.Verify(t, flux.Just(1, 2)).ExpectNext(1, 2).ThenCancel().Verify(t.Context()))
}

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

type opKind int

const (
	opNext    opKind = iota // ExpectNext(v)
	opCount                 // ExpectNextCount(n)
	opWhile                 // ThenConsumeWhile(< v)
	opThen                  // Then(no-op)
	opRecord                // RecordWith
	opMatches               // ExpectRecordedMatches(== want)
	opKinds
)

type op struct {
	kind opKind
	v    int
	want []int // opMatches: the record the model expects
}

type termKind int

const (
	tComplete termKind = iota
	tError
	tErrorIs
	tCancel
)

// verdict is the model's: valid script, pass, or the index of the first
// signal that fails it; either: pass or fail there, both right.
type verdict struct {
	invalid, pass, either bool
	index                 int
}

// model plays ops and the terminal step against items and the end
// (failure or completion; endless: no end at all), as the script should.
func model(items []int, fails, endless bool, ops []op, term termKind) verdict {
	pos, n := 0, len(items)
	var rec []int
	recording, endSeen := false, false
	take := func() {
		if recording {
			rec = append(rec, items[pos])
		}
		pos++
	}
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opNext:
			if pos == n || items[pos] != o.v {
				return verdict{index: pos}
			}
			take()
		case opCount:
			for range o.v {
				if pos == n {
					return verdict{index: n}
				}
				take()
			}
		case opWhile:
			for pos < n && items[pos] < o.v {
				take()
			}
			if pos == n {
				if endless { // waits for an item that never comes
					return verdict{index: n}
				}
				endSeen = true
			}
		case opRecord:
			rec, recording = []int{}, true
		case opMatches:
			o.want = slices.Clone(rec)
		}
	}
	switch {
	case term == tCancel:
		return verdict{pass: endless || !endSeen && n > 0, index: n}
	case endless:
		return verdict{index: n} // never ends: the context does
	case pos < n:
		return verdict{index: pos}
	}
	return verdict{pass: fails == (term != tComplete), index: n}
}

// Verify agrees with the model on random items and scripts, value steps
// that match or not, actions between them, on a synchronous source and
// behind a PublishOn.
func TestVerifyAgreesWithTheModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		items := rapid.SliceOfN(rapid.IntRange(0, 4), 0, 6).Draw(rt, "items")
		fails := rapid.Bool().Draw(rt, "fails")
		async := rapid.Bool().Draw(rt, "async")
		term := termKind(rapid.IntRange(0, int(tCancel)).Draw(rt, "term"))
		ops := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) op {
			k := opKind(rapid.IntRange(0, int(opKinds)-1).Draw(t, "kind"))
			return op{kind: k, v: rapid.IntRange(0, 4).Draw(t, "v")}
		}), 0, 6).Draw(rt, "ops")
		invalid, actions := false, false
		for seen, i := false, 0; i < len(ops); i++ {
			seen = seen || ops[i].kind == opRecord
			invalid = invalid || ops[i].kind == opMatches && !seen
			actions = actions || ops[i].kind == opThen || ops[i].kind == opMatches
			if ops[i].kind == opCount && ops[i].v == 0 {
				ops[i].v = 1
			}
		}
		// An action lets the Flux run ahead, even to its end: before a
		// cancel, only an endless Flux keeps the outcome fixed.
		endless := term == tCancel && actions
		want := model(items, fails, endless, ops, term)
		want.invalid = invalid
		// A Flux with no item to hold it ends by itself as the cancel comes:
		// behind a PublishOn either may be seen first, as the flux contract
		// allows (a synchronous source never looks).
		want.either = async && term == tCancel && !endless && len(items) == 0

		var err error
		synctest.Test(t, func(t *testing.T) {
			f := source(items, fails, endless)
			if async {
				s, serr := schedulers.NewSingle("model")
				require.NoError(t, serr)
				defer s.Dispose()
				f = f.PublishOn(s, 2)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			err = script(t, f, ops, term).Verify(ctx)
		})
		switch {
		case want.invalid:
			require.ErrorIs(rt, err, testkit.ErrInvalidScript)
		case want.either && err == nil:
		case want.pass:
			require.NoError(rt, err)
		default:
			failsAt(rt, err, want.index, "expected")
		}
	})
}

func source(items []int, fails, endless bool) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for _, v := range items {
			if err := s.Next(v); err != nil {
				return err
			}
		}
		switch {
		case endless:
			<-ctx.Done()
			return context.Cause(ctx)
		case fails:
			return errBoom
		}
		return nil
	})
}

func script(t testing.TB, f flux.Flux[int], ops []op, term termKind) *testkit.Verifier[int] {
	v := testkit.Verify(t, f)
	for _, o := range ops {
		switch o.kind {
		case opNext:
			v.ExpectNext(o.v)
		case opCount:
			v.ExpectNextCount(o.v)
		case opWhile:
			below := o.v
			v.ThenConsumeWhile(func(x int) bool { return x < below })
		case opThen:
			v.Then(func() {})
		case opRecord:
			v.RecordWith()
		case opMatches:
			want := o.want
			v.ExpectRecordedMatches(func(rec []int) bool { return slices.Equal(rec, want) })
		}
	}
	switch term {
	case tComplete:
		v.ExpectComplete()
	case tError:
		v.ExpectError()
	case tErrorIs:
		v.ExpectErrorIs(errBoom)
	default:
		v.ThenCancel()
	}
	return v
}
