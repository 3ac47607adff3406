package dispatch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// A handler feeds one follow-up exchange back per exchange, 10,000 rounds,
// with the smallest pending budget: through a Mailbox it cannot deadlock.
func TestFeedbackThroughMailbox(t *testing.T) {
	const rounds = 10_000
	box := dispatch.NewMailbox[testkit.Exchange]()
	var handled atomic.Int64
	p := 4
	rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(p) },
		func(ctx context.Context, x testkit.Exchange) error {
			n := handled.Add(1)
			if n == rounds {
				box.Close()
				return nil
			}
			// The follow-up goes to the same aggregate, so to the handler's
			// own group: the worst case for a bounded source.
			return box.Push(testkit.Exchange{ID: x.ID, Seq: x.Seq + 1})
		})
	require.NoError(t, box.Push(testkit.Exchange{ID: aggregate.NewID(orders, "loop")}))
	d := started(t, box.Flux(), rec.Handle, dispatch.WithParallelism(p), dispatch.WithMaxPending(1),
		dispatch.WithScheduler(newParallel(t, 2)))
	<-d.Done()
	require.NoError(t, d.Err())
	assert.Equal(t, dispatch.Stats{Received: rounds, Succeeded: rounds}, d.Stats())
	assert.NoError(t, testkit.PerKeyFIFO(rec.Calls()))
	assert.Zero(t, box.Len())
	assert.ErrorIs(t, box.Push(testkit.Exchange{}), dispatch.ErrStopped)
}

// The same loop through a bounded channel stalls: the handler waits for room
// in the channel, the intake for room in the pending budget, which the
// handler's own exchange holds.
func TestFeedbackThroughBoundedSourceStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(chan testkit.Exchange, 1)
		id := aggregate.NewID(orders, "loop")
		d := started(t, flux.FromChannel(in), func(ctx context.Context, x testkit.Exchange) error {
			for range 2 { // two follow-ups each: more than the buffers hold
				select {
				case in <- testkit.Exchange{ID: id, Seq: x.Seq + 1}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}, dispatch.WithParallelism(1), dispatch.WithMaxPending(1))
		in <- testkit.Exchange{ID: id}
		select {
		case <-d.Done():
			t.Fatal("the loop ended")
		case <-time.After(time.Hour): // virtual: passes only once nothing can move
		}
		assert.Positive(t, d.Stats().InFlight, "exchanges wait that will never be handled")
		d.ForceStop()
		<-d.Done()
		assert.Zero(t, d.Stats().InFlight)
	})
}

// A force leaves what the dispatcher did not take in the Mailbox: nothing
// is lost between the two.
func TestMailboxKeepsWhatWasNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		box := dispatch.NewMailbox[testkit.Exchange]()
		for _, x := range blocking(100, 10) {
			require.NoError(t, box.Push(x))
		}
		d := started(t, box.Flux(), testkit.Perform, dispatch.WithParallelism(2), dispatch.WithMaxPending(6))
		synctest.Wait()
		d.ForceStop()
		<-d.Done()
		s := d.Stats()
		assert.Equal(t, int64(100), s.Received+int64(box.Len()))
		assert.Zero(t, s.InFlight)

		// A new dispatcher takes over the rest, in order.
		box.Close()
		rest := box.Len()
		rec := testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag { return x.Tag(2) }, nil) // no blocking now
		d2 := started(t, box.Flux(), rec.Handle, dispatch.WithParallelism(2))
		<-d2.Done()
		assert.Equal(t, int64(rest), d2.Stats().Succeeded)
		assert.NoError(t, testkit.PerKeyFIFO(rec.Calls()))
	})
}

// Subscriptions that end at random points, one after another, deliver every
// pushed exchange exactly once and in push order: an exchange popped but
// refused by a cancelled subscription goes back to the head.
func TestMailboxDeliversEachOnceInOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		box := dispatch.NewMailbox[int]()
		pushed := 0
		var got []int
		for range rapid.IntRange(1, 5).Draw(rt, "rounds") {
			for range rapid.IntRange(0, 50).Draw(rt, "pushes") {
				if err := box.Push(pushed); err != nil {
					rt.Fatal(err)
				}
				pushed++
			}
			take := rapid.IntRange(0, box.Len()).Draw(rt, "take")
			ctx, cancel := context.WithCancel(context.Background())
			if take == 0 {
				cancel()
			}
			_ = box.Flux().Subscribe(ctx, func(v int) error {
				got = append(got, v)
				if take--; take == 0 {
					cancel() // the next exchange is popped, refused and put back
				}
				return nil
			})
			cancel()
		}
		box.Close()
		rest, err := flux.Collect(context.Background(), box.Flux())
		if err != nil {
			rt.Fatal(err)
		}
		got = append(got, rest...)
		if len(got) != pushed {
			rt.Fatalf("%d delivered of %d pushed", len(got), pushed)
		}
		for i, v := range got {
			if v != i {
				rt.Fatalf("delivery %d is %d: %v", i, v, got)
			}
		}
	})
}
