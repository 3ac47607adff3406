package flux

import (
	"context"
	"time"
)

// ElapsedValue is an item of Elapsed: the upstream's item and the time
// since the one before it.
type ElapsedValue[T any] struct {
	// Elapsed is the time between the item before (or, for the first,
	// the subscription) and this one reaching Elapsed, by time.Now's
	// monotonic clock.
	Elapsed time.Duration
	Value   T
}

// TimestampedValue is an item of Timestamp: the upstream's item and when
// it came.
type TimestampedValue[T any] struct {
	// Time is time.Now() when the item reached Timestamp.
	Time  time.Time
	Value T
}

// Elapsed emits each item with the time since the previous one (the first
// with the time since the subscription). The clock is time.Now, which
// testing/synctest fakes. Fused: no goroutine, one clock reading per item.
func Elapsed[T any](f Flux[T]) Flux[ElapsedValue[T]] {
	return Flux[ElapsedValue[T]]{subscribe: func(ctx context.Context, emit func(ElapsedValue[T]) error) error {
		last := time.Now()
		return f.run(ctx, func(v T) error {
			now := time.Now()
			d := now.Sub(last)
			last = now
			return emit(ElapsedValue[T]{Elapsed: d, Value: v})
		})
	}}
}

// Timestamp emits each item with the time it came, time.Now() (which
// testing/synctest fakes). Fused: no goroutine, one clock reading per
// item.
func Timestamp[T any](f Flux[T]) Flux[TimestampedValue[T]] {
	return Flux[TimestampedValue[T]]{subscribe: func(ctx context.Context, emit func(TimestampedValue[T]) error) error {
		return f.run(ctx, func(v T) error { return emit(TimestampedValue[T]{Time: time.Now(), Value: v}) })
	}}
}
