package flux_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
)

// subscriber subscribes a Flux on a goroutine of its own. Its onNext records
// each item and then waits for a token on gate, unless gate is nil or
// closed, so that a test decides how far it gets; its discard hook records
// the items dropped for it.
type subscriber[T any] struct {
	gate   chan struct{}
	cancel context.CancelCauseFunc
	done   chan error

	mu       sync.Mutex
	got      []T
	dropped  []T
	reasons  []error
	returned bool
}

// errLeave is the cause a test gives when it cancels a subscriber.
var errLeave = errors.New("subscriber left")

func subscribe[T any](ctx context.Context, f flux.Flux[T], gated bool) *subscriber[T] {
	s := &subscriber[T]{done: make(chan error, 1)}
	if gated {
		s.gate = make(chan struct{}, 1024)
	}
	ctx, s.cancel = context.WithCancelCause(ctx)
	f = flux.DoOnDiscard(f, func(v T, reason error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.dropped = append(s.dropped, v)
		s.reasons = append(s.reasons, reason)
	})
	go func() {
		err := f.Subscribe(ctx, func(v T) error {
			s.mu.Lock()
			s.got = append(s.got, v)
			s.mu.Unlock()
			if s.gate == nil {
				return nil
			}
			select {
			case <-s.gate:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		s.mu.Lock()
		s.returned = true
		s.mu.Unlock()
		s.done <- err
	}()
	return s
}

// allow lets the subscriber finish n more items.
func (s *subscriber[T]) allow(n int) {
	for range n {
		s.gate <- struct{}{}
	}
}

func (s *subscriber[T]) items() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *subscriber[T]) drops() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dropped)
}

// wait returns the subscriber's items and the error its Subscribe returned.
func (s *subscriber[T]) wait() ([]T, error) {
	err := <-s.done
	s.cancel(nil)
	return s.items(), err
}

// must returns the value of a constructor, failing the test given to the
// function it returns if the constructor failed.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

func emitAll[T any](t *testing.T, s *flux.ManySink[T], vs ...T) {
	t.Helper()
	for _, v := range vs {
		require.Equal(t, flux.EmitOK, s.TryEmitNext(v), "emitting %v", v)
	}
}

// requireRefused checks that every Emit call of s is refused with want.
func requireRefused[T any](t *testing.T, s *flux.ManySink[T], want flux.EmitResult, v T) {
	t.Helper()
	require.Equal(t, want, s.TryEmitNext(v))
	require.Equal(t, want, s.EmitNext(t.Context(), v))
	require.Equal(t, want, s.TryEmitComplete())
	require.Equal(t, want, s.TryEmitError(errBoom))
}

func TestSinkConstructorsRefuseInvalidArguments(t *testing.T) {
	for name, mk := range map[string]func() (*flux.ManySink[int], error){
		"unicast capacity 0":      func() (*flux.ManySink[int], error) { return flux.NewUnicastSink[int](0) },
		"multicast capacity -1":   func() (*flux.ManySink[int], error) { return flux.NewMulticastSink[int](-1) },
		"replay limit 0":          func() (*flux.ManySink[int], error) { return flux.NewReplaySink[int](0, 4) },
		"replay capacity 0":       func() (*flux.ManySink[int], error) { return flux.NewReplaySink[int](1, 0) },
		"replay capacity < limit": func() (*flux.ManySink[int], error) { return flux.NewReplaySink[int](5, 4) },
	} {
		s, err := mk()
		require.ErrorIs(t, err, flux.ErrInvalidArgument, name)
		require.ErrorContains(t, err, "flux: New", name)
		require.Nil(t, s, name)
	}
	s := must(flux.NewReplaySink[int](4, 4, nil, flux.WithDropOldest()))(t)
	require.NotNil(t, s)
}

func TestEmitResultString(t *testing.T) {
	want := map[flux.EmitResult]string{
		flux.EmitOK: "ok", flux.EmitFailTerminated: "terminated", flux.EmitFailOverflow: "overflow",
		flux.EmitFailCancelled: "cancelled", flux.EmitFailZeroSubscriber: "zero subscriber",
		flux.EmitFailContext: "context done", flux.EmitResult(42): "EmitResult(42)",
	}
	for r, s := range want {
		require.Equal(t, s, r.String())
		require.Equal(t, r == flux.EmitOK, r.IsSuccess())
	}
}

// Unicast: what is emitted before the subscriber arrives is buffered up to
// the capacity and delivered to it, then the terminal signal; a second
// subscriber is refused; emissions after termination are refused.
func TestUnicastSinkBuffersUntilSubscribed(t *testing.T) {
	s := must(flux.NewUnicastSink[int](3))(t)
	emitAll(t, s, 1, 2, 3)
	require.Equal(t, flux.EmitFailZeroSubscriber, s.TryEmitNext(4))
	require.Equal(t, flux.EmitOK, s.TryEmitComplete())
	requireRefused(t, s, flux.EmitFailTerminated, 5)

	got, err := flux.Collect(t.Context(), s.AsFlux())
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, got)
	_, err = flux.Collect(t.Context(), s.AsFlux())
	require.ErrorIs(t, err, flux.ErrUnicastSink)
	require.ErrorContains(t, err, "flux: UnicastSink")
	requireRefused(t, s, flux.EmitFailTerminated, 6)
}

// Unicast, live: items emitted after the subscriber arrived reach it in
// order, an error arrives after them, and a concurrent second subscriber is
// refused at once.
func TestUnicastSinkLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewUnicastSink[int](2))(t)
		first := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		require.Equal(t, 1, s.CurrentSubscriberCount())
		_, err := flux.Collect(t.Context(), s.AsFlux())
		require.ErrorIs(t, err, flux.ErrUnicastSink)

		for i := range 10 {
			require.Equal(t, flux.EmitOK, s.EmitNext(t.Context(), i))
		}
		require.Equal(t, flux.EmitOK, s.TryEmitError(errBoom))
		got, err := first.wait()
		require.ErrorIs(t, err, errBoom)
		require.Equal(t, seq(10), got)
		require.Equal(t, 0, s.CurrentSubscriberCount())
		requireRefused(t, s, flux.EmitFailTerminated, 11)
	})
}

// Unicast: the subscriber leaving cancels the sink; what it had not taken
// goes to its discard hook with its reason, and later emissions are
// refused as cancelled.
func TestUnicastSinkSubscriberCancels(t *testing.T) {
	// The hook is the one DoOnDiscard installs after the sink's Flux; one
	// that panics is ignored and the sink goes on.
	t.Run("downstream error", func(t *testing.T) {
		s := must(flux.NewUnicastSink[int](4))(t)
		emitAll(t, s, 1, 2, 3)
		var dropped []int
		f := flux.DoOnDiscard(s.AsFlux(), func(v int, reason error) {
			require.ErrorIs(t, reason, errStop)
			dropped = append(dropped, v)
			if v == 2 {
				panic("hook")
			}
		})
		err := f.Subscribe(t.Context(), func(int) error { return errStop })
		require.ErrorIs(t, err, errStop)
		require.Equal(t, []int{2, 3}, dropped)
		requireRefused(t, s, flux.EmitFailCancelled, 4)
	})
	t.Run("ctx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := must(flux.NewUnicastSink[int](4))(t)
			sub := subscribe(t.Context(), s.AsFlux(), true)
			emitAll(t, s, 1, 2, 3)
			synctest.Wait() // 1 is being delivered, 2 and 3 are queued
			sub.cancel(errLeave)
			got, err := sub.wait()
			require.ErrorIs(t, err, errLeave)
			require.Equal(t, []int{1}, got)
			require.Equal(t, []int{2, 3}, sub.drops())
			require.Equal(t, []error{errLeave, errLeave}, sub.reasons)
			requireRefused(t, s, flux.EmitFailCancelled, 4)
		})
	})
	t.Run("after the terminal signal", func(t *testing.T) {
		s := must(flux.NewUnicastSink[int](4))(t)
		emitAll(t, s, 1)
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		got, err := flux.Collect(t.Context(), s.AsFlux())
		require.NoError(t, err)
		require.Equal(t, []int{1}, got)
		requireRefused(t, s, flux.EmitFailTerminated, 2)
	})
}

// A full sink refuses TryEmitNext with EmitFailOverflow while a subscriber
// lags by the capacity; EmitNext parks until the subscriber takes an item,
// or until its ctx ends.
func TestSinkBackpressure(t *testing.T) {
	for name, mk := range map[string]func() (*flux.ManySink[int], error){
		"unicast":   func() (*flux.ManySink[int], error) { return flux.NewUnicastSink[int](2) },
		"multicast": func() (*flux.ManySink[int], error) { return flux.NewMulticastSink[int](2) },
		"replay":    func() (*flux.ManySink[int], error) { return flux.NewReplaySink[int](1, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := mk()
				require.NoError(t, err)
				sub := subscribe(t.Context(), s.AsFlux(), true)
				synctest.Wait()
				emitAll(t, s, 1)
				synctest.Wait() // 1 is being delivered: it holds no slot
				emitAll(t, s, 2, 3)
				require.Equal(t, flux.EmitFailOverflow, s.TryEmitNext(4))

				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				start := time.Now()
				require.Equal(t, flux.EmitFailContext, s.EmitNext(ctx, 4))
				require.Equal(t, time.Second, time.Since(start))

				res := make(chan flux.EmitResult, 1)
				go func() { res <- s.EmitNext(t.Context(), 4) }()
				synctest.Wait()
				require.Empty(t, res, "EmitNext must wait for room")
				sub.allow(1) // 1 finishes, 2 is taken: one slot free
				require.Equal(t, flux.EmitOK, <-res)
				require.Equal(t, flux.EmitFailOverflow, s.TryEmitNext(5))

				require.Equal(t, flux.EmitOK, s.TryEmitComplete())
				close(sub.gate)
				got, err := sub.wait()
				require.NoError(t, err)
				require.Equal(t, []int{1, 2, 3, 4}, got)
			})
		})
	}
}

// A done ctx emits nothing, even with room.
func TestSinkEmitNextDoneContext(t *testing.T) {
	s := must(flux.NewMulticastSink[int](2))(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.Equal(t, flux.EmitFailContext, s.EmitNext(ctx, 1))
	require.Equal(t, flux.EmitOK, s.TryEmitComplete())
	got, err := flux.Collect(t.Context(), s.AsFlux())
	require.NoError(t, err)
	require.Empty(t, got)
}

// Several EmitNext calls waiting for room at once all get through, one
// slot at a time, and the subscriber gets each item once.
func TestSinkManyWaitingEmitters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewMulticastSink[int](1))(t)
		sub := subscribe(t.Context(), s.AsFlux(), true)
		synctest.Wait()
		emitAll(t, s, 0)
		synctest.Wait()
		emitAll(t, s, 1) // full
		var wg sync.WaitGroup
		for i := 2; i < 7; i++ {
			wg.Go(func() {
				if r := s.EmitNext(t.Context(), i); r != flux.EmitOK {
					t.Errorf("EmitNext(%d): %v", i, r)
				}
			})
		}
		synctest.Wait()
		close(sub.gate)
		wg.Wait()
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		got, err := sub.wait()
		require.NoError(t, err)
		require.Equal(t, []int{0, 1}, got[:2])
		require.ElementsMatch(t, seq(7), got)
	})
}

// Multicast: every subscriber present gets each item; one that joins later
// gets only what is emitted after it joined; the terminal signal reaches
// all, after their items, and a subscriber arriving after it gets it at once.
func TestMulticastSinkFanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewMulticastSink[int](4))(t)
		a := subscribe(t.Context(), s.AsFlux(), false)
		b := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		require.Equal(t, 2, s.CurrentSubscriberCount())
		emitAll(t, s, 1, 2, 3)
		synctest.Wait()
		c := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		emitAll(t, s, 4, 5)
		require.Equal(t, flux.EmitOK, s.TryEmitError(errBoom))
		for _, sub := range []*subscriber[int]{a, b} {
			got, err := sub.wait()
			require.ErrorIs(t, err, errBoom)
			require.Equal(t, []int{1, 2, 3, 4, 5}, got)
		}
		got, err := c.wait()
		require.ErrorIs(t, err, errBoom)
		require.Equal(t, []int{4, 5}, got)
		requireRefused(t, s, flux.EmitFailTerminated, 6)

		got, err = flux.Collect(t.Context(), s.AsFlux())
		require.ErrorIs(t, err, errBoom)
		require.Empty(t, got)
	})
}

// Multicast is warm: with nobody subscribed it keeps up to the capacity for
// the next subscriber, who starts with those items; a subscriber joining it
// starts at the next item; EmitNext waits for a subscriber to make room.
func TestMulticastSinkWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewMulticastSink[int](2))(t)
		emitAll(t, s, 1, 2)
		require.Equal(t, flux.EmitFailZeroSubscriber, s.TryEmitNext(3))
		res := make(chan flux.EmitResult, 1)
		go func() { res <- s.EmitNext(t.Context(), 3) }()
		synctest.Wait()
		require.Empty(t, res)

		a := subscribe(t.Context(), s.AsFlux(), true)
		synctest.Wait() // a holds 1; 2 and 3 are queued for it
		require.Equal(t, flux.EmitOK, <-res)
		b := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		require.Equal(t, flux.EmitFailOverflow, s.TryEmitNext(4))
		close(a.gate)
		synctest.Wait()
		emitAll(t, s, 4)
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		got, err := a.wait()
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4}, got)
		got, err = b.wait()
		require.NoError(t, err)
		require.Equal(t, []int{4}, got)
	})
}

// Multicast: a subscriber's ctx ending unsubscribes it and drops nothing;
// the sink stays open, and what the last subscriber had not taken is kept
// for the next one.
func TestMulticastSinkSubscriberLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewMulticastSink[int](4))(t)
		a := subscribe(t.Context(), s.AsFlux(), false)
		b := subscribe(t.Context(), s.AsFlux(), true)
		synctest.Wait()
		emitAll(t, s, 1, 2, 3)
		synctest.Wait()
		a.cancel(errLeave)
		got, err := a.wait()
		require.ErrorIs(t, err, errLeave)
		require.Equal(t, []int{1, 2, 3}, got)
		require.Equal(t, 1, s.CurrentSubscriberCount())

		b.cancel(errLeave) // b holds 1; 2 and 3 stay for the next subscriber
		got, err = b.wait()
		require.ErrorIs(t, err, errLeave)
		require.Equal(t, []int{1}, got)
		require.Empty(t, b.drops())
		require.Empty(t, a.drops())
		require.Equal(t, 0, s.CurrentSubscriberCount())

		emitAll(t, s, 4)
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		got, err = flux.Collect(t.Context(), s.AsFlux())
		require.NoError(t, err)
		require.Equal(t, []int{2, 3, 4}, got)
	})
}

// WithDropOldest: a subscriber that lags by the capacity loses its oldest
// queued item, given to its discard hook with ErrSinkOverflow; the others
// lose nothing and the emitter never waits. With nobody subscribed a full
// buffer still refuses.
func TestMulticastSinkDropOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewMulticastSink[int](2, flux.WithDropOldest()))(t)
		emitAll(t, s, 1, 2)
		require.Equal(t, flux.EmitFailZeroSubscriber, s.TryEmitNext(3))
		fast := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		slow := subscribe(t.Context(), s.AsFlux(), true)
		synctest.Wait()
		emitAll(t, s, 3)
		synctest.Wait() // slow holds 3
		for i := 4; i < 10; i++ {
			require.Equal(t, flux.EmitOK, s.EmitNext(t.Context(), i))
			synctest.Wait() // fast keeps up
		}
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		close(slow.gate)
		got, err := fast.wait()
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
		got, err = slow.wait()
		require.NoError(t, err)
		require.Equal(t, []int{3, 8, 9}, got)
		require.Equal(t, []int{4, 5, 6, 7}, slow.drops())
		for _, r := range slow.reasons {
			require.ErrorIs(t, r, flux.ErrSinkOverflow)
		}
		require.Empty(t, fast.drops())
	})
}

// Replay: a late subscriber gets the last n items, then the live ones; one
// that arrives after the terminal signal gets the last n, then the signal.
func TestReplaySinkLateSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewReplaySink[int](3, 4))(t)
		early := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		emitAll(t, s, 1, 2)
		synctest.Wait()
		fewer := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		emitAll(t, s, 3, 4, 5)
		synctest.Wait()
		late := subscribe(t.Context(), s.AsFlux(), false)
		synctest.Wait()
		emitAll(t, s, 6, 7)
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())

		for sub, want := range map[*subscriber[int]][]int{
			early: {1, 2, 3, 4, 5, 6, 7},
			fewer: {1, 2, 3, 4, 5, 6, 7},
			late:  {3, 4, 5, 6, 7},
		} {
			got, err := sub.wait()
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
		for range 2 {
			got, err := flux.Collect(t.Context(), s.AsFlux())
			require.NoError(t, err)
			require.Equal(t, []int{5, 6, 7}, got)
		}
		requireRefused(t, s, flux.EmitFailTerminated, 8)
	})
}

// Replay with nobody subscribed never refuses: the window moves on.
func TestReplaySinkWithoutSubscribers(t *testing.T) {
	s := must(flux.NewReplaySink[string](2, 2))(t)
	emitAll(t, s, "a", "b", "c", "d", "e")
	require.Equal(t, flux.EmitOK, s.TryEmitError(errBoom))
	got, err := flux.Collect(t.Context(), s.AsFlux())
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, []string{"d", "e"}, got)
}

// A nil error fails the sink with ErrInvalidArgument.
func TestSinkTryEmitNilError(t *testing.T) {
	s := must(flux.NewMulticastSink[int](1))(t)
	require.Equal(t, flux.EmitOK, s.TryEmitError(nil))
	_, err := flux.Collect(t.Context(), s.AsFlux())
	require.ErrorIs(t, err, flux.ErrInvalidArgument)
	require.ErrorContains(t, err, "MulticastSink.TryEmitError")
}

// The Flux of a sink composes: a downstream Take stops the subscriber,
// which leaves the sink; a panic in onNext ends the subscription with
// *PanicError.
func TestSinkFluxComposes(t *testing.T) {
	s := must(flux.NewReplaySink[int](5, 5))(t)
	emitAll(t, s, 1, 2, 3, 4, 5)
	got, err := flux.Collect(t.Context(), flux.Map(s.AsFlux(), double).Take(2))
	require.NoError(t, err)
	require.Equal(t, []int{2, 4}, got)
	err = s.AsFlux().Subscribe(t.Context(), func(int) error { panic("boom") })
	var pe *flux.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, s.CurrentSubscriberCount())
}

// A replay sink whose window fills the ring (limit == capacity): a waiting
// EmitNext is woken once the slow subscriber catches up, although the
// window keeps every slot in use.
func TestReplaySinkFullWindowWakesEmitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := must(flux.NewReplaySink[int](2, 2))(t)
		sub := subscribe(t.Context(), s.AsFlux(), true)
		synctest.Wait()
		emitAll(t, s, 0)
		synctest.Wait() // sub holds 0
		emitAll(t, s, 1, 2)
		require.Equal(t, flux.EmitFailOverflow, s.TryEmitNext(3))
		res := make(chan flux.EmitResult, 1)
		go func() { res <- s.EmitNext(t.Context(), 3) }()
		synctest.Wait()
		require.Empty(t, res)
		close(sub.gate)
		require.Equal(t, flux.EmitOK, <-res)
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		got, err := sub.wait()
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 2, 3}, got)
	})
}

// A subscriber of a ManySink or of a RefCount connection whose onNext calls
// runtime.Goexit leaves as one whose onNext failed does: it is detached, so
// that the multicast sink does not count it, the unicast sink is cancelled,
// and the connection's upstream is cancelled and joined once it was the
// last subscriber.
func TestSinkSubscriberGoexit(t *testing.T) {
	exiting := func(f flux.Flux[int]) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = f.Subscribe(context.Background(), func(int) error { runtime.Goexit(); return nil })
		}()
		<-done
	}
	t.Run("multicast", func(t *testing.T) {
		leakFree(t)
		s, err := flux.NewMulticastSink[int](4)
		require.NoError(t, err)
		require.Equal(t, flux.EmitOK, s.TryEmitNext(0)) // warm: kept for the first subscriber
		exiting(s.AsFlux())
		require.Zero(t, s.CurrentSubscriberCount(), "the subscriber that exited is still attached")
		for i := 1; i <= 4; i++ {
			require.Equal(t, flux.EmitOK, s.TryEmitNext(i))
		}
		require.Equal(t, flux.EmitOK, s.TryEmitComplete())
		// Alone again, the next subscriber starts with what the last one
		// left.
		got, err := flux.Collect(t.Context(), s.AsFlux())
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4}, got)
	})
	t.Run("unicast", func(t *testing.T) {
		leakFree(t)
		s, err := flux.NewUnicastSink[int](4)
		require.NoError(t, err)
		require.Equal(t, flux.EmitOK, s.TryEmitNext(0))
		require.Equal(t, flux.EmitOK, s.TryEmitNext(1))
		var discarded []int
		exiting(flux.DoOnDiscard(s.AsFlux(), func(v int, _ error) { discarded = append(discarded, v) }))
		require.Equal(t, flux.EmitFailCancelled, s.TryEmitNext(2))
		require.Equal(t, []int{1}, discarded, "the item not taken goes to the discard hook")
	})
	t.Run("RefCount", func(t *testing.T) {
		leakFree(t)
		shared := flux.Range(0, 10).Publish(2).RefCount(1)
		exiting(shared)
		// The connection it was the last of is gone: the next subscriber
		// opens a new one.
		var got []int
		err := ended(t, func() (err error) {
			got, err = flux.Collect(t.Context(), shared)
			return err
		})
		require.NoError(t, err)
		require.Equal(t, seq(10), got)
	})
}
