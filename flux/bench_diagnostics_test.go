package flux_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/aggflow/aggflow/flux"
)

// BenchmarkLogDisabled: 100k ints through a Map, with and without a Log
// whose logger's level is above Debug (so every record is refused by
// Enabled), and with a Checkpoint; per item is per int. The baseline "map"
// runs in the same run: the difference is the cost of the unused Log.
func BenchmarkLogDisabled(b *testing.B) {
	const items = 100_000
	off := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	src := flux.Range(0, items)
	b.Run("map", func(b *testing.B) {
		f := flux.Map(src, inc)
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("map+log-disabled", func(b *testing.B) {
		f := flux.Map(src, inc).Log(off, "bench")
		loopItems(b, items, func() { sumOf(b, f) })
	})
	b.Run("map+checkpoint", func(b *testing.B) {
		f := flux.Map(src, inc).Checkpoint("bench")
		loopItems(b, items, func() { sumOf(b, f) })
	})
}
