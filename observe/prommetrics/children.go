package prommetrics

import (
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// children are the child metrics of one Labels, each made on its first use
// (so that an outcome never seen has no series) and then read with one
// atomic load: WithLabelValues hashes its values and allocates, which the
// hot path must not do per event.
type children struct {
	base     []string                   // dispatcher, context, aggregate
	values   [adapter.Outcomes][]string // base and the outcome
	wait     atomic.Pointer[prometheus.Observer]
	counts   [adapter.Outcomes]atomic.Pointer[prometheus.Counter]
	handling [adapter.Outcomes]atomic.Pointer[prometheus.Observer]
}

func newChildren(l dispatch.Labels) *children {
	c := &children{base: labelValues(l)}
	for o := range dispatch.Outcome(adapter.Outcomes) {
		c.values[o] = withOutcome(c.base, o)
	}
	return c
}

// labelValues returns the values of l's labels, made valid UTF-8 (a label
// value must be, or the client panics).
func labelValues(l dispatch.Labels) []string {
	return []string{
		strings.ToValidUTF8(l.Dispatcher, "\uFFFD"),
		strings.ToValidUTF8(l.Aggregate.Context, "\uFFFD"),
		strings.ToValidUTF8(l.Aggregate.Aggregate, "\uFFFD"),
	}
}

// child returns *slot, or makes it with with(vec, values...) on first use;
// goroutines racing on a first use get the same metric from the vector.
// with is a method expression, so no closure is made per call.
func child[V, M any](slot *atomic.Pointer[M], vec V, with func(V, ...string) M, values []string) M {
	if p := slot.Load(); p != nil {
		return *p
	}
	m := with(vec, values...)
	slot.Store(&m)
	return m
}

// withOutcome returns base and the value of outcome o, in a new slice.
func withOutcome(base []string, o dispatch.Outcome) []string {
	return append(base[:len(base):len(base)], o.String())
}
