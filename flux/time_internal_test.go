package flux

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The lock the time operators share with their timers' goroutines: a
// waiter is handed the lock before its holder can take it again, a waiter
// whose ctx ends leaves the lock as it was, and it excludes under
// contention (with -race).
func TestTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTurn()
		require.NoError(t, l.take(t.Context()))
		var order []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.hold()
			order = append(order, "waiter")
			l.give()
		}()
		synctest.Wait() // the waiter is parked
		l.give()
		require.NoError(t, l.take(t.Context()), "the holder comes back at once")
		order = append(order, "holder")
		l.give()
		<-done
		require.Equal(t, []string{"waiter", "holder"}, order)
		require.Equal(t, int32(0), l.state.Load())
	})
	synctest.Test(t, func(t *testing.T) {
		l := newTurn()
		l.hold()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		require.ErrorIs(t, l.take(ctx), context.DeadlineExceeded)
		require.Equal(t, int32(1), l.state.Load(), "held, nobody parked")
		l.give()
		require.NoError(t, l.take(t.Context()))
		l.give()
	})
	synctest.Test(t, func(t *testing.T) {
		l := newTurn()
		var wg sync.WaitGroup
		inside, count := 0, 0
		for range 4 {
			wg.Go(func() {
				for range 200 {
					l.hold()
					inside++
					require.Equal(t, 1, inside)
					count++
					inside--
					l.give()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 800, count)
	})
}
