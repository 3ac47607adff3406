package bench

import (
	"sync"

	"github.com/reactivex/rxgo/v2"
)

// GroupBuffer is the capacity of each group's channel in the sharded and
// rxgo implementations: Reactor's Queues.XS_BUFFER_SIZE, which is also
// aggflow's default group buffer.
const GroupBuffer = 32

var inlineImpl = Impl{
	Name: "inline",
	What: "the producer calls the handler itself: the floor of the work",
	Run: func(r *Run) (int64, error) {
		var n int64
		err := r.Produce(func(x Exchange) bool {
			r.Handle(x)
			n++
			return true
		})
		return n, err
	},
}

var shardedImpl = Impl{
	Name: "sharded",
	What: "hand-written: P goroutines with a buffered channel (32) each; the producer sends to channel[key]",
	Run: func(r *Run) (int64, error) {
		p := r.P
		chans := make([]chan Exchange, p)
		counts := make([]int64, p)
		var wg sync.WaitGroup
		for i := range chans {
			chans[i] = make(chan Exchange, GroupBuffer)
			wg.Go(func() {
				var n int64
				for x := range chans[i] {
					r.Handle(x)
					n++
				}
				counts[i] = n
			})
		}
		err := r.Produce(func(x Exchange) bool {
			chans[x.Key.Mod(p)] <- x
			return true
		})
		for _, c := range chans {
			close(c)
		}
		wg.Wait()
		return sum(counts), err
	},
}

var rxgoImpl = Impl{
	Name: "rxgo",
	What: "rxgo v2.5.0: FromChannel(32) -> GroupBy(P, key, buffered 32), a goroutine per group observing it in order",
	Run: func(r *Run) (int64, error) {
		p := r.P
		in := make(chan rxgo.Item, GroupBuffer)
		groups := rxgo.FromChannel(in).GroupBy(p, func(it rxgo.Item) int {
			return it.V.(Exchange).Key.Mod(p)
		}, rxgo.WithBufferedChannel(GroupBuffer))
		counts := make([]int64, p)
		var wg sync.WaitGroup
		i := 0
		for g := range groups.Observe() {
			group, j := g.V.(rxgo.Observable), i
			i++
			wg.Go(func() {
				var n int64
				for it := range group.Observe() {
					x := it.V.(Exchange)
					r.Handle(x)
					n++
				}
				counts[j] = n
			})
		}
		err := r.Produce(func(x Exchange) bool {
			in <- rxgo.Of(x)
			return true
		})
		close(in)
		wg.Wait()
		return sum(counts), err
	},
}

func sum(counts []int64) int64 {
	var s int64
	for _, c := range counts {
		s += c
	}
	return s
}
