package testkit

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
)

// Distribution is how the exchanges of a generated workload spread over
// aggregate ids.
type Distribution int

const (
	// Uniform draws every id with the same probability.
	Uniform Distribution = iota
	// Zipf draws id i with a probability proportional to 1/(i+1)^1.2: a few
	// ids take most exchanges, a long tail takes the rest.
	Zipf
	// HotKey sends four exchanges in five to one id, the rest uniformly.
	HotKey
)

// String returns "uniform", "zipf" or "hot-key".
func (d Distribution) String() string {
	return enumName(d, "Distribution", "uniform", "zipf", "hot-key")
}

// enumName returns names[e], or "Type(e)" for a value out of range.
func enumName[E ~int](e E, typ string, names ...string) string {
	if e >= 0 && int(e) < len(names) {
		return names[e]
	}
	return typ + "(" + strconv.Itoa(int(e)) + ")"
}

// Keys returns a generator of n aggregate ids ("id-0" to "id-<ids-1>") drawn
// with distribution d. It panics when ids < 1 or n < 0 (a test's bug).
func Keys(d Distribution, ids, n int) *rapid.Generator[[]string] {
	if ids < 1 || n < 0 {
		panic("testkit: Keys needs ids >= 1 and n >= 0")
	}
	cdf := zipfCDF(ids)
	id := rapid.Custom(func(t *rapid.T) string { return "id-" + strconv.Itoa(drawID(t, d, ids, cdf)) })
	return rapid.SliceOfN(id, n, n)
}

func drawID(t *rapid.T, d Distribution, ids int, cdf []float64) int {
	switch d {
	case Zipf:
		u := rapid.Float64Range(0, 1).Draw(t, "u")
		for i, c := range cdf {
			if u <= c {
				return i
			}
		}
		return ids - 1
	case HotKey:
		if rapid.IntRange(0, 4).Draw(t, "hot") > 0 {
			return 0
		}
	}
	return rapid.IntRange(0, ids-1).Draw(t, "id")
}

// zipfCDF returns the cumulative distribution of Zipf's law with exponent 1.2
// over n ids.
func zipfCDF(n int) []float64 {
	cdf := make([]float64, n)
	sum := 0.0
	for i := range cdf {
		sum += 1 / math.Pow(float64(i+1), 1.2)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return cdf
}

// Behaviour is what a workload's handler does with one exchange (Perform).
type Behaviour int

const (
	// Instant returns nil at once.
	Instant Behaviour = iota
	// Delay waits Exchange.Delay (or until ctx is done), then returns nil (or
	// ctx's error). Under testing/synctest the wait is virtual.
	Delay
	// Fail returns ErrInjected.
	Fail
	// Panic panics with ErrInjected.
	Panic
	// Block waits until ctx is cancelled and returns its error: a handler
	// that only a force stop ends.
	Block
)

// String returns the lower-case name of the behaviour.
func (b Behaviour) String() string {
	return enumName(b, "Behaviour", "instant", "delay", "fail", "panic", "block")
}

// ErrInjected is returned (Fail) or panicked with (Panic) by Perform.
var ErrInjected = errors.New("testkit: injected failure")

// Exchange is one generated exchange: an aggregate id, its sequence number
// among the exchanges of that id (0, 1, 2... in emission order) and what the
// handler does with it. It implements aggregate.IDCapable.
type Exchange struct {
	ID    aggregate.ID
	Seq   int
	Do    Behaviour
	Delay time.Duration
}

// AggregateID returns x.ID.
func (x Exchange) AggregateID() aggregate.ID { return x.ID }

// Tag returns the Recorder tag of x for a dispatcher of the given parallelism
// (number of groups), which routes by aggregate.GroupKey.
func (x Exchange) Tag(parallelism int) Tag {
	return Tag{Key: x.ID.ID, Seq: x.Seq, Group: aggregate.GroupKey(x.ID.ID, parallelism)}
}

// Perform carries out x.Do: the body of a workload's handler.
func Perform(ctx context.Context, x Exchange) error {
	switch x.Do {
	case Delay:
		timer := time.NewTimer(x.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case Fail:
		return ErrInjected
	case Panic:
		panic(ErrInjected)
	case Block:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// StopKind is how a workload's run is stopped.
type StopKind int

const (
	// StopNone lets the source complete and the dispatcher drain by itself.
	StopNone StopKind = iota
	// StopGraceful calls StopGracefully at the stop point.
	StopGraceful
	// StopForce calls ForceStop at the stop point.
	StopForce
	// StopForceDuringGraceful calls StopGracefully at the stop point, then
	// ForceStop ForceAfter later while the graceful stop is draining.
	StopForceDuringGraceful
)

// String returns the name of the stop kind.
func (k StopKind) String() string {
	return enumName(k, "StopKind", "none", "graceful", "force", "force-during-graceful")
}

// Forces reports whether the stop ends with ForceStop, the only way a Block
// handler returns.
func (k StopKind) Forces() bool { return k == StopForce || k == StopForceDuringGraceful }

// StopPoint says when and how a run is stopped: once After handler calls have
// started (or nothing can progress any more), stop with Kind.
type StopPoint struct {
	Kind       StopKind
	After      int
	ForceAfter time.Duration
}

// Workload is a generated run: the exchanges in emission order, with their
// per-id sequence numbers, and the stop point.
type Workload struct {
	Distribution Distribution
	Exchanges    []Exchange
	Stop         StopPoint
}

// Workloads returns a generator of workloads of at most maxLen exchanges
// addressed to named: a key distribution over 1 to 64 ids, a behaviour per
// exchange (mostly instant or delayed up to 2ms, some failing or panicking,
// and, only when the stop forces, some blocking until cancelled, so that every
// run can end) and a stop point within the stream.
func Workloads(named aggregate.NamedAggregate, maxLen int) *rapid.Generator[Workload] {
	return rapid.Custom(func(t *rapid.T) Workload {
		w := Workload{Distribution: rapid.SampledFrom([]Distribution{Uniform, Zipf, HotKey}).Draw(t, "distribution")}
		n := rapid.IntRange(0, maxLen).Draw(t, "n")
		keys := Keys(w.Distribution, rapid.IntRange(1, 64).Draw(t, "ids"), n).Draw(t, "keys")
		w.Stop = StopPoint{
			Kind:       rapid.SampledFrom([]StopKind{StopNone, StopGraceful, StopForce, StopForceDuringGraceful}).Draw(t, "stop"),
			After:      rapid.IntRange(0, n).Draw(t, "after"),
			ForceAfter: time.Duration(rapid.IntRange(0, 2000).Draw(t, "forceAfterMicros")) * time.Microsecond,
		}
		behaviours := []Behaviour{Instant, Instant, Instant, Delay, Delay, Fail, Panic}
		if w.Stop.Kind.Forces() {
			behaviours = append(behaviours, Block)
		}
		seq := make(map[string]int)
		w.Exchanges = make([]Exchange, n)
		for i, k := range keys {
			x := Exchange{ID: aggregate.NewID(named, k), Seq: seq[k], Do: rapid.SampledFrom(behaviours).Draw(t, "do")}
			if x.Do == Delay {
				x.Delay = time.Duration(rapid.IntRange(1, 2000).Draw(t, "delayMicros")) * time.Microsecond
			}
			seq[k]++
			w.Exchanges[i] = x
		}
		return w
	})
}
