package flux_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/aggflow/aggflow/flux"
	"github.com/reactivex/rxgo/v2"
	"github.com/stretchr/testify/require"
)

// An early exit from FromObservable returns without waiting for rxgo to
// close its channel (Range returns on its context without closing it, and a
// caller's channel may never close), reads nothing more from the channel, and
// leaves no rxgo goroutine behind once the context was honoured: synctest
// fails on a subscription blocked for ever and waits for every goroutine of
// the bubble.
func TestFromObservableEarlyExit(t *testing.T) {
	sources := map[string]func(ch chan rxgo.Item) rxgo.Observable{
		"Range": func(chan rxgo.Item) rxgo.Observable { return rxgo.Range(0, 1_000_000) },
		"Range Map": func(chan rxgo.Item) rxgo.Observable {
			return rxgo.Range(0, 1_000_000).Map(func(_ context.Context, v any) (any, error) { return v, nil })
		},
		"FromChannel open": func(ch chan rxgo.Item) rxgo.Observable { return rxgo.FromChannel(ch) },
	}
	exits := map[string]func(f flux.Flux[int]) ([]int, error){
		"Take": func(f flux.Flux[int]) ([]int, error) {
			return flux.Collect(context.Background(), f.Take(3))
		},
		"onNext error": func(f flux.Flux[int]) ([]int, error) {
			var got []int
			err := f.Subscribe(context.Background(), func(v int) error {
				if got = append(got, v); len(got) == 3 {
					return errStop
				}
				return nil
			})
			return got, err
		},
		"ctx cancelled": func(f flux.Flux[int]) ([]int, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []int
			err := f.Subscribe(ctx, func(v int) error {
				if got = append(got, v); len(got) == 3 {
					cancel()
				}
				return nil
			})
			return got, err
		},
	}
	for sname, source := range sources {
		for ename, exit := range exits {
			t.Run(sname+"/"+ename, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ch := make(chan rxgo.Item, 10)
					for i := range cap(ch) {
						ch <- rxgo.Of(i)
					}
					got, err := exit(flux.FromObservable[int](source(ch)))
					require.Equal(t, []int{0, 1, 2}, got)
					switch ename {
					case "onNext error":
						require.ErrorIs(t, err, errStop)
					case "ctx cancelled":
						require.ErrorIs(t, err, context.Canceled)
					default:
						require.NoError(t, err)
					}
					if sname == "FromChannel open" {
						require.Len(t, ch, 7, "items after the third taken from the caller's channel")
					}
				})
			})
		}
	}
}

// An observable built on its own context (Interval) keeps running after the
// subscription ended, until that context ends.
func TestFromObservableOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		obs := rxgo.Interval(rxgo.WithDuration(1), rxgo.WithContext(ctx))
		got, err := flux.Collect(context.Background(), flux.FromObservable[int](obs).Take(2))
		require.NoError(t, err)
		require.Equal(t, []int{0, 1}, got)
		cancel()
	})
}
