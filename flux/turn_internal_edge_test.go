package flux

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

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
