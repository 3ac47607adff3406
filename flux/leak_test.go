package flux_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/reactivex/rxgo/v2"
	"github.com/stretchr/testify/require"
)

// endless emits 0, 1, 2, ... until the subscriber is gone; failing emits
// 0..9 and then fails with errBoom.
var (
	endless = flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i := 0; ; i++ {
			if err := s.Next(i); err != nil {
				return err
			}
		}
	})
	failing = flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i := range 10 {
			if err := s.Next(i); err != nil {
				return err
			}
		}
		return errBoom
	})
)

// asyncShapes are the pipelines that start goroutines or tasks.
var asyncShapes = map[string]func(flux.Flux[int], schedulers.Scheduler) flux.Flux[int]{
	"PublishOn": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] { return f.PublishOn(s, 4) },
	"SubscribeOn": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] {
		return f.SubscribeOn(s)
	},
	"FlatMap": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] {
		return flux.FlatMap(f, func(v int) flux.Flux[int] { return flux.Just(v, v).PublishOn(s, 1) }, 3)
	},
	"GroupBy dispatcher": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] {
		return flux.FlatMap(flux.GroupBy(f, func(v int) int { return v % 4 }, 4, flux.WithGroupBuffer(2)),
			func(g flux.GroupedFlux[int]) flux.Flux[int] {
				return flux.ConcatMap(g.PublishOn(s, 2), func(v int) flux.Flux[int] { return flux.Just(v) })
			}, 4)
	},
	"GroupBy unfused": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] {
		return flux.FlatMap(flux.GroupBy(f, func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(1)),
			func(g flux.GroupedFlux[int]) flux.Flux[int] { return flux.Map(g.Flux, double) }, 3)
	},
	"rxgo round trip": func(f flux.Flux[int], s schedulers.Scheduler) flux.Flux[int] {
		return flux.FromObservable[int](f.PublishOn(s, 2).Observable(context.Background()))
	},
}

var errStop = errors.New("stop")

// No goroutine outlives its subscription on any exit path.
func TestNoGoroutineOutlivesItsSubscription(t *testing.T) {
	for name, shape := range asyncShapes {
		t.Run(name, func(t *testing.T) {
			t.Run("ctx cancelled", func(t *testing.T) {
				leakFree(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				n := 0
				err := shape(endless, newParallel(t, 2)).Subscribe(ctx, func(int) error {
					if n++; n == 5 {
						cancel()
					}
					return nil
				})
				require.ErrorIs(t, err, context.Canceled)
			})
			t.Run("upstream error", func(t *testing.T) {
				leakFree(t)
				err := shape(failing, newParallel(t, 2)).Subscribe(t.Context(), func(int) error { return nil })
				require.ErrorIs(t, err, errBoom)
			})
			t.Run("onNext error", func(t *testing.T) {
				leakFree(t)
				n := 0
				err := shape(endless, newParallel(t, 2)).Subscribe(t.Context(), func(int) error {
					if n++; n == 3 {
						return errStop
					}
					return nil
				})
				require.ErrorIs(t, err, errStop)
				require.Equal(t, 3, n)
			})
			t.Run("Take satisfied", func(t *testing.T) {
				leakFree(t)
				got, err := flux.Collect(t.Context(), shape(endless, newParallel(t, 2)).Take(3))
				require.NoError(t, err)
				require.Len(t, got, 3)
			})
			t.Run("All broken early", func(t *testing.T) {
				leakFree(t)
				n := 0
				for v, err := range shape(endless, newParallel(t, 2)).All(t.Context()) {
					require.NoError(t, err)
					require.GreaterOrEqual(t, v, 0)
					if n++; n == 3 {
						break
					}
				}
				require.Equal(t, 3, n)
			})
		})
	}
}

func TestAllYieldsItemsThenError(t *testing.T) {
	leakFree(t)
	var got []int
	var last error
	for v, err := range failing.PublishOn(newParallel(t, 1), 2).All(t.Context()) {
		if err != nil {
			last = err
			continue
		}
		got = append(got, v)
	}
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
	require.ErrorIs(t, last, errBoom)
}

func TestFromObservable(t *testing.T) {
	leakFree(t)
	ctx := t.Context()
	obs := rxgo.Range(0, 5, rxgo.WithContext(ctx)).Map(func(_ context.Context, v any) (any, error) { return v.(int) * 2, nil })
	testkit := flux.FromObservable[int](obs)
	got, err := flux.Collect(ctx, testkit)
	require.NoError(t, err)
	require.Equal(t, []int{0, 2, 4, 6, 8}, got)

	got, err = flux.Collect(ctx, testkit.Take(2))
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, got)

	_, err = flux.Collect(ctx, flux.FromObservable[string](obs))
	require.ErrorIs(t, err, flux.ErrTypeMismatch)
	require.ErrorContains(t, err, "item of type int, want string")

	_, err = flux.Collect(ctx, flux.FromObservable[int](rxgo.Thrown(errBoom)))
	require.ErrorIs(t, err, errBoom)
}

func TestObservableBridge(t *testing.T) {
	leakFree(t)
	ctx := t.Context()
	var got []int
	for it := range failing.Observable(ctx).Observe() {
		if it.Error() {
			require.ErrorIs(t, it.E, errBoom)
			continue
		}
		got = append(got, it.V.(int))
	}
	require.Len(t, got, 10)

	// Ending the bounding context ends an endless subscription.
	bctx, cancel := context.WithCancel(ctx)
	ch := endless.Observable(bctx).Observe()
	<-ch
	cancel()
	for range ch {
	}
}
