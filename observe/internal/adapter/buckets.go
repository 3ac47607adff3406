package adapter

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// defaultBuckets are histogram upper bounds in seconds, 1-2.5-5 steps from
// 10µs to 10s: handlers in this library run from microseconds (in-memory
// state) to seconds (I/O), and queue waits span the same range.
var defaultBuckets = []float64{
	0.00001, 0.000025, 0.00005,
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// DefaultBuckets returns a copy of the default upper bounds, in seconds.
func DefaultBuckets() []float64 { return slices.Clone(defaultBuckets) }

// errBuckets is the cause given for a bucket list that is not a list of
// upper bounds.
var errBuckets = errors.New("buckets must be finite and strictly increasing, at least one")

// Buckets returns a copy of bounds when they are valid histogram upper
// bounds: at least one, finite (no NaN, no ±Inf: the +Inf bucket is
// implicit) and strictly increasing; else an error that says where they
// fail.
func Buckets(bounds []float64) ([]float64, error) {
	if len(bounds) == 0 {
		return nil, errBuckets
	}
	for i, b := range bounds {
		switch {
		case math.IsNaN(b) || math.IsInf(b, 0):
			return nil, fmt.Errorf("%w: bound %d is %v", errBuckets, i, b)
		case i > 0 && b <= bounds[i-1]:
			return nil, fmt.Errorf("%w: bound %d (%v) is not above bound %d (%v)", errBuckets, i, b, i-1, bounds[i-1])
		}
	}
	return slices.Clone(bounds), nil
}
