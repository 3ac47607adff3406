package flux_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// A second subscription of a FromChannel flux while the first runs is
// refused at once with ErrUnicastSource, rather than splitting the
// channel's items with the first; once the first returned, a new
// subscription takes what it left, in order.
func TestFromChannelSecondSubscriberRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int, 4)
		f := flux.FromChannel(ch)
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan int, 4)
		first := make(chan error, 1)
		go func() {
			first <- f.Subscribe(ctx, func(v int) error { got <- v; return nil })
		}()
		synctest.Wait() // the first waits on the empty channel
		ch <- 1
		ch <- 2
		synctest.Wait()

		second, stop := context.WithTimeout(t.Context(), time.Second)
		defer stop()
		var split []int
		err := f.Subscribe(second, func(v int) error { split = append(split, v); return nil })
		require.ErrorIs(t, err, flux.ErrUnicastSource)
		require.ErrorContains(t, err, "FromChannel")
		require.Empty(t, split)

		cancel()
		require.ErrorIs(t, <-first, context.Canceled)
		require.Equal(t, []int{1, 2}, []int{<-got, <-got})

		ch <- 3
		close(ch)
		var rest []int
		require.NoError(t, f.Subscribe(t.Context(), func(v int) error { rest = append(rest, v); return nil }))
		require.Equal(t, []int{3}, rest)
	})
}
