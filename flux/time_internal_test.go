package flux

import (
	"context"
	"runtime"
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

// waiting reports how many goroutines are parked on t.
func (t *turn) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.parked)
}

// A waiter whose ctx ends just as the holder gives the lock back (Sample's
// or BufferTimeout's upstream, parked while the timer's goroutine delivers,
// leaves when that delivery fails and cancels it): the holder may find the
// queue emptied by the waiter that left. give must not fail then, and the
// lock must end free. The test holds the inner mutex so that the leaving
// waiter and the giving holder both queue on it, in that order as a rule.
func TestTurnGiveRacesLeavingWaiter(t *testing.T) {
	for range 200 {
		l := newTurn()
		require.NoError(t, l.take(context.Background()))
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- l.take(ctx) }()
		for l.waiting() == 0 {
			runtime.Gosched()
		}
		l.mu.Lock()
		cancel()
		for range 50 {
			runtime.Gosched() // the waiter wakes and queues on mu
		}
		gave := make(chan any, 1)
		go func() {
			defer func() { gave <- recover() }()
			l.give()
		}()
		for range 50 {
			runtime.Gosched() // the holder's fast path fails and it queues on mu
		}
		l.mu.Unlock()
		require.Nil(t, <-gave, "give panicked")
		if <-res == nil {
			l.give() // it was handed the lock before it left
		}
		require.Equal(t, int32(0), l.state.Load(), "the lock is free")
	}
}
