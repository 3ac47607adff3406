package prommetrics

import (
	"regexp"

	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// DefaultNamespace starts every metric name: "aggflow_exchanges_total".
const DefaultNamespace = "aggflow"

// Option configures New. A nil Option is ignored; an invalid one makes New
// return an error wrapping ErrInvalidOption.
type Option func(*config)

type config = adapter.Config

// namespaceSyntax is a classic Prometheus metric name without colons (they
// are for recording rules).
var namespaceSyntax = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithNamespace sets the prefix of the metric names (default
// DefaultNamespace): "<ns>_exchanges_total" and so on. It must start with a
// letter or "_" and hold only letters, digits and "_".
func WithNamespace(ns string) Option {
	return func(c *config) {
		if !namespaceSyntax.MatchString(ns) {
			c.Reject("namespace %q is not a metric name prefix", ns)
			return
		}
		c.Namespace = ns
	}
}

// WithQueueWaitBuckets sets the bucket upper bounds of the queue wait
// histogram, in seconds (default DefaultBuckets). They must be finite and
// strictly increasing, at least one; the +Inf bucket is implicit.
func WithQueueWaitBuckets(bounds ...float64) Option { return adapter.QueueWaitBuckets(bounds) }

// WithHandlingBuckets sets the bucket upper bounds of the handling time
// histogram, as WithQueueWaitBuckets does for the queue wait.
func WithHandlingBuckets(bounds ...float64) Option { return adapter.HandlingBuckets(bounds) }

// DefaultBuckets returns the default histogram upper bounds, in seconds:
// 1-2.5-5 steps from 10µs to 10s (19 bounds), finer at the low end than
// prometheus.DefBuckets (5ms to 10s), since handlers of in-memory state
// take microseconds.
func DefaultBuckets() []float64 { return adapter.DefaultBuckets() }
