package flux_test

import (
	"context"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// A key of interface type may hold a value the map cannot hash or == cannot
// compare; the runtime's panic is then the key's failure, a *PanicError that
// OnErrorContinue can resume, not a panic out of Subscribe.
func TestDistinctUnhashableKeyIsPanicError(t *testing.T) {
	identity := func(v any) any { return v }
	cases := []struct {
		name      string
		op        func(flux.Flux[any]) flux.Flux[any]
		in        []any // fails on the item at bad
		bad       int
		resumedIn []any
		resumed   []any
	}{
		{
			name: "DistinctBy",
			op:   func(f flux.Flux[any]) flux.Flux[any] { return flux.DistinctBy(f, identity) },
			in:   []any{1, []int{2}, 3}, bad: 1,
			resumedIn: []any{1, []int{2}, 1, 3}, resumed: []any{1, 3},
		},
		{
			name: "DistinctUntilChangedBy",
			op:   func(f flux.Flux[any]) flux.Flux[any] { return flux.DistinctUntilChangedBy(f, identity) },
			in:   []any{1, []int{2}, []int{3}, 3}, bad: 2,
			// []int{3} is skipped and not kept as the last key: 3 follows []int{2}.
			resumedIn: []any{1, []int{2}, []int{3}, 3, 3}, resumed: []any{1, []int{2}, 3},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []any
			var err error
			require.NotPanics(t, func() { got, err = flux.Collect(context.Background(), c.op(flux.Just(c.in...))) })
			var pe *flux.PanicError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, c.in[:c.bad], got)

			var skipped []any
			resumed := flux.OnErrorContinue(c.op(flux.Just(c.resumedIn...)), func(_ error, v any) { skipped = append(skipped, v) })
			got, err = flux.Collect(context.Background(), resumed)
			require.NoError(t, err)
			require.Equal(t, c.resumed, got)
			require.Len(t, skipped, 1)
		})
	}
}
