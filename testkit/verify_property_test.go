package testkit_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

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
