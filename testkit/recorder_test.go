package testkit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

func TestRecorderOutcomes(t *testing.T) {
	boom := errors.New("boom")
	rec := testkit.NewRecorder(func(x int) testkit.Tag { return testkit.Tag{Key: "k", Seq: x, Group: x % 2} },
		func(ctx context.Context, x int) error {
			switch x {
			case 1:
				return boom
			case 2:
				panic("oops")
			case 3:
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	ctx := t.Context()
	assert.NoError(t, rec.Handle(ctx, 0))
	assert.ErrorIs(t, rec.Handle(ctx, 1), boom)
	assert.PanicsWithValue(t, "oops", func() { _ = rec.Handle(ctx, 2) }, "the panic goes on up")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, rec.Handle(cancelled, 3), context.Canceled)
	assert.NoError(t, rec.Handle(cancelled, 4), "nil after cancellation is a success")

	calls := rec.Calls()
	require.Len(t, calls, 5)
	want := []dispatch.Outcome{dispatch.OutcomeSuccess, dispatch.OutcomeError, dispatch.OutcomePanic,
		dispatch.OutcomeCancelled, dispatch.OutcomeSuccess}
	for i, c := range calls {
		assert.Equal(t, want[i], c.Outcome, "call %d", i)
		assert.Equal(t, testkit.Tag{Key: "k", Seq: i, Group: i % 2}, c.Tag)
		assert.Equal(t, int64(2*i+1), c.Start, "one logical clock")
		assert.Equal(t, int64(2*i+2), c.End)
	}
	assert.ErrorIs(t, calls[1].Err, boom)
}

func TestRecorderNilHandler(t *testing.T) {
	rec := testkit.NewRecorder(func(string) testkit.Tag { return testkit.Tag{} }, nil)
	require.NoError(t, rec.Handle(t.Context(), "x"))
	assert.Len(t, rec.Calls(), 1)
}
