package adapter

import (
	"errors"
	"fmt"
	"slices"
)

// Config is what both adapters are configured with: the namespace their
// metric names start with and the histogram upper bounds, in seconds. Each
// adapter's Option is a func(*Config) under its own name.
type Config struct {
	Namespace           string
	QueueWait, Handling []float64
	invalid             []error
}

// NewConfig returns the defaults with namespace, then applies opts (nil
// ones are skipped): an adapter's own Option type.
func NewConfig[O ~func(*Config)](namespace string, opts []O) Config {
	c := Config{Namespace: namespace, QueueWait: DefaultBuckets(), Handling: DefaultBuckets()}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	return c
}

// SetBuckets sets *dst to a copy of bounds, or records why they are
// invalid; what names the histogram in that error.
func (c *Config) SetBuckets(dst *[]float64, what string, bounds []float64) {
	b, err := Buckets(bounds)
	if err != nil {
		c.Reject("%s: %w", what, err)
		return
	}
	*dst = b
}

// Reject records an invalid option.
func (c *Config) Reject(format string, args ...any) {
	c.invalid = append(c.invalid, fmt.Errorf(format, args...))
}

// Err returns nil, or every invalid option joined, each wrapping sentinel.
func (c Config) Err(sentinel error) error {
	errs := make([]error, len(c.invalid))
	for i, err := range c.invalid {
		errs[i] = fmt.Errorf("%w: %w", sentinel, err)
	}
	return errors.Join(errs...)
}

// QueueWaitBuckets is the option that sets the queue wait histogram's
// bounds: a copy of them, taken now, so that the caller may reuse the slice.
func QueueWaitBuckets(bounds []float64) func(*Config) {
	bounds = slices.Clone(bounds)
	return func(c *Config) { c.SetBuckets(&c.QueueWait, "queue wait buckets", bounds) }
}

// HandlingBuckets is QueueWaitBuckets for the handling histogram.
func HandlingBuckets(bounds []float64) func(*Config) {
	bounds = slices.Clone(bounds)
	return func(c *Config) { c.SetBuckets(&c.Handling, "handling buckets", bounds) }
}
