package flux_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/stretchr/testify/require"
)

// upstream is a cold source fed by the test: each subscription counts
// itself, emits what is sent on in until in is closed, and records when it
// exited and with which cause of its context. Closing in ends it with end.
type upstream struct {
	in            chan int
	end           error
	subscriptions atomic.Int64
	running       atomic.Int64
	cause         atomic.Value
}

func newUpstream() *upstream { return &upstream{in: make(chan int)} }

func (u *upstream) flux() flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		u.subscriptions.Add(1)
		u.running.Add(1)
		defer u.running.Add(-1)
		for {
			select {
			case v, ok := <-u.in:
				if !ok {
					return u.end
				}
				if err := s.Next(v); err != nil {
					return err
				}
			case <-ctx.Done():
				u.cause.Store(context.Cause(ctx))
				return context.Cause(ctx)
			}
		}
	})
}

func (u *upstream) send(vs ...int) {
	for _, v := range vs {
		u.in <- v
	}
}

func TestShareRefusesInvalidArguments(t *testing.T) {
	_, err := flux.Collect(t.Context(), flux.Just(1).Publish(0).RefCount(1))
	require.ErrorIs(t, err, flux.ErrInvalidArgument)
	require.ErrorContains(t, err, "Publish")
	_, err = flux.Collect(t.Context(), flux.Just(1).Publish(4).RefCount(0))
	require.ErrorIs(t, err, flux.ErrInvalidArgument)
	require.ErrorContains(t, err, "RefCount")
}

// RefCount(n) subscribes the upstream once, when the n-th subscriber
// arrives; every subscriber then gets every item and the terminal signal.
// After that the next subscribers open a new connection.
func TestRefCountConnectsAtTheNthSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newUpstream()
		shared := u.flux().Publish(2).RefCount(2)
		for round := int64(1); round <= 2; round++ {
			a := subscribe(t.Context(), shared, false)
			synctest.Wait()
			require.Equal(t, round-1, u.subscriptions.Load(), "not before the second subscriber")
			b := subscribe(t.Context(), shared, false)
			synctest.Wait()
			require.Equal(t, round, u.subscriptions.Load())
			u.send(1, 2, 3, 4, 5)
			close(u.in)
			for _, sub := range []*subscriber[int]{a, b} {
				got, err := sub.wait()
				require.NoError(t, err)
				require.Equal(t, []int{1, 2, 3, 4, 5}, got)
			}
			u.in = make(chan int)
		}
	})
}

// Share: a subscriber joining a running connection gets only what the
// upstream emits after it joined; an upstream error reaches all after their
// items.
func TestShareLateSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newUpstream()
		u.end = errBoom
		shared := u.flux().Share()
		a := subscribe(t.Context(), shared, false)
		synctest.Wait()
		u.send(1, 2)
		synctest.Wait()
		b := subscribe(t.Context(), shared, false)
		synctest.Wait()
		u.send(3)
		close(u.in)
		got, err := a.wait()
		require.ErrorIs(t, err, errBoom)
		require.Equal(t, []int{1, 2, 3}, got)
		got, err = b.wait()
		require.ErrorIs(t, err, errBoom)
		require.Equal(t, []int{3}, got)
		require.Equal(t, int64(1), u.subscriptions.Load())
	})
}

// The last subscriber to leave cancels the upstream (cause ErrCancelled)
// and returns only once the upstream's goroutine exited; one leaving
// earlier does neither. A subscriber that leaves before the n-th arrives
// never connects.
func TestRefCountLastSubscriberCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := newUpstream()
		shared := u.flux().Publish(4).RefCount(2)
		early := subscribe(t.Context(), shared, false)
		synctest.Wait()
		early.cancel(errLeave)
		_, err := early.wait()
		require.ErrorIs(t, err, errLeave)
		require.Zero(t, u.subscriptions.Load())

		a := subscribe(t.Context(), shared, false)
		b := subscribe(t.Context(), shared, false)
		synctest.Wait()
		u.send(1)
		synctest.Wait()
		a.cancel(errLeave)
		got, err := a.wait()
		require.ErrorIs(t, err, errLeave)
		require.Equal(t, []int{1}, got)
		require.Equal(t, int64(1), u.running.Load(), "one subscriber left: the upstream goes on")
		u.send(2)
		synctest.Wait()
		b.cancel(errLeave)
		got, err = b.wait()
		require.ErrorIs(t, err, errLeave)
		require.Equal(t, []int{1, 2}, got)
		require.Zero(t, u.running.Load(), "the last subscriber joined the upstream")
		require.ErrorIs(t, u.cause.Load().(error), flux.ErrCancelled)
	})
}

// What the connection had pulled when the last subscriber left is
// discarded, never lost: the items buffered for it go to its hook with its
// reason, the one the upstream was emitting to the n-th subscriber's hook
// with ErrCancelled.
func TestRefCountCancelDiscards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pulled atomic.Int64
		sub := subscribe(t.Context(), counted(100, &pulled).Publish(2).RefCount(1), true)
		synctest.Wait() // sub holds 0, 1 and 2 are buffered, the upstream waits with 3
		sub.cancel(errLeave)
		got, err := sub.wait()
		require.ErrorIs(t, err, errLeave)
		require.Equal(t, []int{0}, got)
		require.ElementsMatch(t, []int{1, 2, 3}, sub.drops())
		for i, v := range sub.drops() {
			want := errLeave
			if v == 3 {
				want = flux.ErrCancelled
			}
			require.ErrorIs(t, sub.reasons[i], want, "reason for %d", v)
		}
		require.Equal(t, int(pulled.Load()), len(got)+len(sub.drops()))
	})
}

// The slowest subscriber holds the upstream back: nothing is dropped, and
// each subscriber gets every item.
func TestShareBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pulled atomic.Int64
		shared := counted(50, &pulled).Publish(3).RefCount(2)
		fast := subscribe(t.Context(), shared, false)
		slow := subscribe(t.Context(), shared, true)
		synctest.Wait()
		require.LessOrEqual(t, pulled.Load(), int64(1+3+1), "at most one in delivery, three buffered, one waiting")
		close(slow.gate)
		for _, sub := range []*subscriber[int]{fast, slow} {
			got, err := sub.wait()
			require.NoError(t, err)
			require.Equal(t, seq(50), got)
		}
	})
}

// A panic or runtime.Goexit in the upstream, on the connection's goroutine,
// fails every subscriber with *PanicError.
func TestShareUpstreamPanics(t *testing.T) {
	for name, fn := range map[string]func(){
		"panic":  func() { panic("boom") },
		"Goexit": runtime.Goexit,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shared := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
					if err := s.Next(1); err != nil {
						return err
					}
					fn()
					return nil
				}).Publish(4).RefCount(2)
				a := subscribe(t.Context(), shared, false)
				b := subscribe(t.Context(), shared, false)
				for _, sub := range []*subscriber[int]{a, b} {
					got, err := sub.wait()
					var pe *flux.PanicError
					require.ErrorAs(t, err, &pe)
					require.Equal(t, []int{1}, got)
					if name == "Goexit" {
						require.ErrorIs(t, err, schedulers.ErrGoexit)
					}
				}
			})
		})
	}
}

// Subscribers joining and leaving a Share from many goroutines at once:
// each sees a contiguous run of the upstream's sequence, and once they have
// all returned no goroutine of any connection is left.
func TestShareConcurrentSubscribers(t *testing.T) {
	leakFree(t)
	var subscriptions atomic.Int64
	shared := flux.Defer(func() flux.Flux[int] {
		subscriptions.Add(1)
		return endless
	}).Publish(4).RefCount(1)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 20 {
				n := 1 + (g+round)%7
				got, err := flux.Collect(t.Context(), shared.Take(n))
				if err != nil || len(got) != n {
					t.Errorf("got %v, %v; want %d items", got, err, n)
					return
				}
				for i := 1; i < n; i++ {
					if got[i] != got[i-1]+1 {
						t.Errorf("not contiguous: %v", got)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, subscriptions.Load(), int64(1))
}
