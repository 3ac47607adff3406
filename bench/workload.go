package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aggflow/aggflow/aggregate"
)

// Handler is the work done per exchange.
type Handler string

const (
	// Noop does nothing: what is measured is the dispatching.
	Noop Handler = "noop"
	// Spin1us busy-waits 1 µs on the clock, like ReactorBench's spin(1_000).
	Spin1us Handler = "spin1us"
	// Sleep50us blocks its thread in the nanosleep system call for 50 µs, the
	// way ReactorBench's LockSupport.parkNanos(50_000) blocks its thread.
	// Both take about 120-130 µs on this machine class (the kernel's timer
	// slack). It is not time.Sleep: see GoSleep50us.
	Sleep50us Handler = "sleep50us"
	// GoSleep50us is time.Sleep(50 µs): the goroutine parks instead of its
	// thread. Go's timers wake a fully idle process through the network
	// poller with 1 ms resolution, so it lasts from about 0.1 ms (other
	// goroutines busy) to 1.1 ms (everything idle) and measures the runtime's
	// timer rather than the dispatcher. Selectable, not in the default grid;
	// Reactor runs it as sleep50us.
	GoSleep50us Handler = "gosleep50us"
)

// Handlers lists every handler, in report order.
var Handlers = []Handler{Noop, Spin1us, Sleep50us, GoSleep50us}

// ParseHandler returns the Handler named s.
func ParseHandler(s string) (Handler, error) {
	for _, h := range Handlers {
		if string(h) == s {
			return h, nil
		}
	}
	return "", fmt.Errorf("bench: unknown handler %q (want one of %v)", s, Handlers)
}

// blocking reports whether h blocks rather than computes.
func (h Handler) blocking() bool { return h == Sleep50us || h == GoSleep50us }

// reactorName is the handler's name in ReactorBench.
func (h Handler) reactorName() string {
	if h == GoSleep50us {
		return string(Sleep50us)
	}
	return string(h)
}

// Cell is one point of the grid: K distinct ids, P groups, a handler.
type Cell struct {
	K       int     `json:"keys"`
	P       int     `json:"groups"`
	Handler Handler `json:"handler"`
}

// String is the cell's name in benchmark names and reports: "noop/k1024/p128".
func (c Cell) String() string {
	return string(c.Handler) + "/k" + strconv.Itoa(c.K) + "/p" + strconv.Itoa(c.P)
}

// ParseCell reads the form String writes.
func ParseCell(s string) (Cell, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "k") || !strings.HasPrefix(parts[2], "p") {
		return Cell{}, fmt.Errorf("bench: cell %q is not handler/kK/pP", s)
	}
	h, err := ParseHandler(parts[0])
	if err != nil {
		return Cell{}, err
	}
	k, err1 := strconv.Atoi(parts[1][1:])
	p, err2 := strconv.Atoi(parts[2][1:])
	if err1 != nil || err2 != nil || k < 1 || p < 1 {
		return Cell{}, fmt.Errorf("bench: cell %q: keys and groups must be positive integers", s)
	}
	return Cell{K: k, P: p, Handler: h}, nil
}

// Exchange is what the producer streams: an aggregate id with the numbers
// that let a run check order and count without trusting the implementation.
// It is passed by value.
type Exchange struct {
	Key aggregate.Key // the aggregate id, one of the workload's K keys
	Idx int32         // the id's index in the workload
	Seq int32         // this id's sequence number: 1, 2, 3, ... in production order
	Num int32         // position in the stream, 0-based
	// Sent is the send time in nanoseconds since the run's start, set only
	// in latency runs.
	Sent int64
}

// Workload is the pre-generated input of a cell: the ids and the order in
// which they are drawn. It is read-only once built and shared by the
// repetitions of a process.
type Workload struct {
	// Keys are the ids "account-0" ... "account-(K-1)", as ReactorBench's,
	// each hashed once, as a JVM String keeps its hash.
	Keys []aggregate.Key
	Seq  []int32 // N indexes into Keys
}

// NewWorkload draws n ids from k exactly as ReactorBench does: ids
// "account-i", indexes from SplittableRandom(k).nextInt(k).
func NewWorkload(k, n int) *Workload {
	w := &Workload{Keys: make([]aggregate.Key, k), Seq: make([]int32, n)}
	for i := range w.Keys {
		w.Keys[i] = aggregate.NewKey("account-" + strconv.Itoa(i))
	}
	r := newSplittableRandom(int64(k))
	for i := range w.Seq {
		w.Seq[i] = r.nextInt(int32(k))
	}
	return w
}

// splittableRandom is java.util.SplittableRandom (JDK 8-17) for the calls
// ReactorBench makes: the constructor with a seed and nextInt(bound).
type splittableRandom struct{ seed uint64 }

const goldenGamma = 0x9e3779b97f4a7c15

func newSplittableRandom(seed int64) *splittableRandom {
	return &splittableRandom{seed: uint64(seed)}
}

func (r *splittableRandom) next32() int32 {
	r.seed += goldenGamma
	z := r.seed
	z = (z ^ (z >> 33)) * 0x62a9d9ed799705f5
	return int32(((z ^ (z >> 28)) * 0xcb24d0a5c88c35b3) >> 32)
}

// nextInt is SplittableRandom.nextInt(bound), bound > 0, rejection and
// int32 wrap-around included.
func (r *splittableRandom) nextInt(bound int32) int32 {
	v := r.next32()
	m := bound - 1
	if bound&m == 0 {
		return v & m
	}
	for u := int32(uint32(v) >> 1); ; u = int32(uint32(r.next32()) >> 1) {
		v = u % bound
		if u+m-v >= 0 {
			return v
		}
	}
}
