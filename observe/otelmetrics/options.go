package otelmetrics

import (
	"regexp"

	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// DefaultNamespace starts every instrument name: "aggflow.exchanges".
const DefaultNamespace = "aggflow"

// Option configures New. A nil Option is ignored; an invalid one makes New
// return an error wrapping ErrInvalidOption.
type Option func(*config)

type config = adapter.Config

// namespaceSyntax is OpenTelemetry's instrument name syntax, kept short
// enough that the longest name ("<ns>.exchanges.in_flight") stays within
// its 255 characters.
var namespaceSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.\-/]{0,200}$`)

// WithNamespace sets the prefix of the instrument names (default
// DefaultNamespace): "<ns>.exchanges" and so on. It must start with a letter
// and hold only letters, digits and "_.-/", at most 201 characters.
func WithNamespace(ns string) Option {
	return func(c *config) {
		if !namespaceSyntax.MatchString(ns) {
			c.Reject("namespace %q is not an instrument name prefix", ns)
			return
		}
		c.Namespace = ns
	}
}

// WithQueueWaitBuckets sets the explicit bucket upper bounds of the queue
// wait histogram, in seconds (default DefaultBuckets); a View of the
// MeterProvider may override them. They must be finite and strictly
// increasing, at least one.
func WithQueueWaitBuckets(bounds ...float64) Option { return adapter.QueueWaitBuckets(bounds) }

// WithHandlingBuckets sets the bucket upper bounds of the handling time
// histogram, as WithQueueWaitBuckets does for the queue wait.
func WithHandlingBuckets(bounds ...float64) Option { return adapter.HandlingBuckets(bounds) }

// DefaultBuckets returns the default histogram upper bounds, in seconds:
// 1-2.5-5 steps from 10µs to 10s (19 bounds). OpenTelemetry's own defaults
// (0 to 10000) are meant for milliseconds: in seconds, nearly every
// exchange would fall in the first bucket.
func DefaultBuckets() []float64 { return adapter.DefaultBuckets() }
