package flux_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// The synchronous operators agree with their plain-slice definitions.
func FuzzSynchronousOperators(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5}, uint8(2), uint8(1), uint8(3))
	f.Add([]byte{}, uint8(0), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, take, skip, size uint8) {
		ctx := context.Background()
		src := flux.FromSlice(data)
		n, k, b := int(take), int(skip), int(size%16)+1

		got, err := flux.Collect(ctx, src.Skip(k).Take(n))
		require.NoError(t, err)
		want := data[min(k, len(data)):]
		want = want[:min(n, len(want))]
		require.Equal(t, nonNil(want), nonNil(got))

		batches, err := flux.Collect(ctx, flux.Buffer(src, b))
		require.NoError(t, err)
		require.Equal(t, nonNil(slices.Collect(slices.Chunk(data, b))), nonNil(batches))

		odd := func(v byte) bool { return v%2 == 1 }
		got, err = flux.Collect(ctx, src.TakeUntil(odd))
		require.NoError(t, err)
		end := slices.IndexFunc(data, odd)
		if end < 0 {
			end = len(data) - 1
		}
		require.Equal(t, nonNil(data[:end+1]), nonNil(got))

		sums, err := flux.Collect(ctx, flux.Scan(src, 0, func(a int, v byte) int { return a + int(v) }))
		require.NoError(t, err)
		total, err := flux.Collect(ctx, flux.Reduce(src, 0, func(a int, v byte) int { return a + int(v) }))
		require.NoError(t, err)
		require.Len(t, sums, len(data)+1)
		require.Equal(t, []int{sums[len(sums)-1]}, total)
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
