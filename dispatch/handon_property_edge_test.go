package dispatch_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// A graceful stop never discards an item taken from a user's channel,
// whatever the interleaving of the producer still sending, the source, the
// budget and the stop: every item the producer sent is handled, in order
// per id, or still in the channel; nothing is discarded.
func TestGracefulStopNeverDiscardsWhatTheChannelGave(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 6).Draw(rt, "ids")
		budget := rapid.IntRange(1, 8).Draw(rt, "budget")
		capacity := rapid.IntRange(0, 4).Draw(rt, "capacity")
		stopAfter := rapid.IntRange(0, 40).Draw(rt, "stopAfter")
		yields := rapid.IntRange(0, 3).Draw(rt, "yields")

		in := make(chan testkit.Exchange, capacity)
		var (
			mu        sync.Mutex
			handled   = map[string][]int{}
			discarded = map[string][]int{}
			nth       int
		)
		trigger := make(chan struct{})
		d, err := dispatch.New("orders", orders, flux.FromChannel(in), func(_ context.Context, x testkit.Exchange) error {
			for range yields {
				runtime.Gosched()
			}
			mu.Lock()
			handled[x.ID.ID] = append(handled[x.ID.ID], x.Seq)
			nth++
			if nth == stopAfter {
				close(trigger)
			}
			mu.Unlock()
			return nil
		}, quiet, dispatch.WithMaxPending(budget), dispatch.WithParallelism(4),
			dispatch.WithDiscardHook(func(x testkit.Exchange, _ error) {
				mu.Lock()
				discarded[x.ID.ID] = append(discarded[x.ID.ID], x.Seq)
				mu.Unlock()
			}))
		if err != nil {
			rt.Fatal(err)
		}
		if err := d.Prepare(context.Background()); err != nil {
			rt.Fatal(err)
		}
		if err := d.Start(); err != nil {
			rt.Fatal(err)
		}

		stopProducing := make(chan struct{})
		sent := make(chan []testkit.Exchange, 1)
		go func() { // sends until told to stop, still while the dispatcher stops
			var xs []testkit.Exchange
			defer func() { sent <- xs }()
			for i := 0; ; i++ {
				x := testkit.Exchange{ID: aggregate.NewID(orders, itoa(i%ids)), Seq: i / ids}
				select {
				case in <- x:
					xs = append(xs, x)
				case <-stopProducing:
					return
				}
			}
		}()
		if stopAfter > 0 {
			<-trigger
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.StopGracefully(ctx); err != nil {
			rt.Fatal(err)
		}
		close(stopProducing)
		xs := <-sent
		left := map[string][]int{}
		for len(in) > 0 {
			x := <-in
			left[x.ID.ID] = append(left[x.ID.ID], x.Seq)
		}
		if s := d.Stats(); s.Discarded != 0 || s.Failed != 0 || s.InFlight != 0 || s.Received != s.Succeeded+s.Discarded {
			rt.Fatalf("stats %+v: a graceful stop discarded an item taken from the channel", s)
		}
		want := map[string][]int{}
		for _, x := range xs {
			want[x.ID.ID] = append(want[x.ID.ID], x.Seq)
		}
		for id, seqs := range want {
			got := append(append(append([]int(nil), handled[id]...), discarded[id]...), left[id]...)
			if fmt.Sprint(got) != fmt.Sprint(seqs) {
				rt.Fatalf("id %s: handled %v, discarded %v, left in the channel %v; sent %v", id, handled[id], discarded[id], left[id], seqs)
			}
		}
	})
}
