package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// RingSize is the capacity of each consumer's ring in the spsc
// implementation.
const RingSize = 1024

var spscImpl = Impl{
	Name: "spsc",
	What: "one lock-free single-producer single-consumer ring (1024) per consumer goroutine (GOMAXPROCS of them), group pinned by key mod consumers: the floor of a hand-off",
	Run: func(r *Run) (int64, error) {
		c := runtime.GOMAXPROCS(0)
		rings := make([]*ring, c)
		counts := make([]int64, c)
		var wg sync.WaitGroup
		for i := range rings {
			rings[i] = newRing(RingSize)
			wg.Go(func() { counts[i] = rings[i].consume(r) })
		}
		p := r.P
		err := r.Produce(func(x Exchange) bool {
			rings[x.Key.Mod(p)%c].push(x)
			return true
		})
		for _, q := range rings {
			q.close()
		}
		wg.Wait()
		return sum(counts), err
	},
}

// Spin and yield budgets of a ring's waits, in polls.
const (
	ringSpins  = 64 // polls of the other side's index before yielding
	ringYields = 8  // runtime.Gosched calls before the consumer parks
)

// ring is a bounded single-producer single-consumer queue of exchanges.
//
// The producer owns tail and a cached copy of head; the consumer owns head
// and a cached copy of tail; each side's fields sit on cache lines of their
// own, so the sides touch each other's line only when the cached copy runs
// out (the producer thinks the ring is full, the consumer that it is empty).
//
// Waiting: a consumer that finds the ring empty polls tail ringSpins times,
// then yields ringYields times (on 2 cores the producer may need its
// thread), then parks on wake after setting sleeping and re-checking tail;
// a producer that published an exchange (or closes) and sees sleeping set
// swaps it back to 0 and sends one token. Sequentially consistent atomics
// make the two checks cross: either the consumer sees the new tail or the
// producer sees sleeping, so no wake-up is lost; the one token per parking
// is always taken, so the send never blocks. A producer that finds the
// ring full polls, then yields until there is room: it never parks. The
// spinning costs CPU that another process on the machine could have used,
// so this baseline suffers most when the cores are shared.
type ring struct {
	_         [64]byte
	tail      atomic.Uint64 // next slot the producer writes
	headCache uint64        // producer's last view of head
	_         [48]byte
	head      atomic.Uint64 // next slot the consumer reads
	tailCache uint64        // consumer's last view of tail
	_         [48]byte
	sleeping  atomic.Int32 // 1 while the consumer is (about to be) parked
	closed    atomic.Bool  // set by the producer after its last push
	_         [56]byte
	wake      chan struct{}
	mask      uint64
	buf       []Exchange
}

func newRing(size int) *ring {
	if size < 1 || size&(size-1) != 0 {
		panic("bench: ring size must be a power of two")
	}
	return &ring{wake: make(chan struct{}, 1), mask: uint64(size - 1), buf: make([]Exchange, size)}
}

// push appends x, waiting for room. Producer only.
func (q *ring) push(x Exchange) {
	t := q.tail.Load()
	size := q.mask + 1
	for i := 0; t-q.headCache == size; i++ {
		q.headCache = q.head.Load()
		if i >= ringSpins && t-q.headCache == size {
			runtime.Gosched()
		}
	}
	q.buf[t&q.mask] = x
	q.tail.Store(t + 1)
	q.wakeConsumer()
}

// close tells the consumer that nothing more comes. Producer only.
func (q *ring) close() {
	q.closed.Store(true)
	q.wakeConsumer()
}

func (q *ring) wakeConsumer() {
	if q.sleeping.Load() != 0 && q.sleeping.CompareAndSwap(1, 0) {
		q.wake <- struct{}{}
	}
}

// consume hands every exchange to r.Handle, in order, until the ring is
// closed and drained, and returns how many it handled. Consumer only. Each
// exchange is copied out and its slot released before the handler runs, so
// a slow handler does not hold ring space. (A direct call, not a func
// value, so that the copy stays on the stack.)
func (q *ring) consume(r *Run) int64 {
	var n int64
	h := q.head.Load()
	for {
		if h == q.tailCache {
			var ok bool
			if q.tailCache, ok = q.await(h); !ok {
				return n
			}
		}
		for ; h != q.tailCache; h++ {
			x := q.buf[h&q.mask]
			q.head.Store(h + 1)
			r.Handle(x)
			n++
		}
	}
}

// await returns a tail beyond h, or false once the ring is closed and
// drained.
func (q *ring) await(h uint64) (uint64, bool) {
	for i := 0; ; i++ {
		if t := q.tail.Load(); t != h {
			return t, true
		}
		if q.closed.Load() {
			// closed is stored after the last tail: this load sees it.
			t := q.tail.Load()
			return t, t != h
		}
		switch {
		case i < ringSpins:
		case i < ringSpins+ringYields:
			runtime.Gosched()
		default:
			q.sleeping.Store(1)
			if q.tail.Load() != h || q.closed.Load() {
				if !q.sleeping.CompareAndSwap(1, 0) {
					<-q.wake // the producer saw us and sent: take its token
				}
				continue
			}
			<-q.wake
			i = 0
		}
	}
}
