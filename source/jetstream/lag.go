package jetstream

import "context"

// Lag is not written yet.
func (c *Consumer[T]) Lag() map[int32]int64 { return nil }

// CaughtUp is not written yet.
func (c *Consumer[T]) CaughtUp(ctx context.Context) error { return nil }
