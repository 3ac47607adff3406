package prommetrics_test

import (
	"testing"

	"github.com/aggflow/aggflow/observe/internal/scenario"
)

// BenchmarkDispatch is the cost per exchange of a dispatcher with the
// Collector (registered, never gathered during the run) against the same
// dispatcher without an Observer and with one that does nothing (what
// observing costs the dispatcher).
func BenchmarkDispatch(b *testing.B) {
	b.Run("observer=none", func(b *testing.B) { scenario.BenchDispatch(b, nil) })
	b.Run("observer=nop", func(b *testing.B) { scenario.BenchDispatch(b, scenario.Nop{}) })
	b.Run("observer=prometheus", func(b *testing.B) {
		c, _ := newCollector(b)
		scenario.BenchDispatch(b, c)
	})
}

// BenchmarkEvents is the Collector's own cost for one exchange's events.
func BenchmarkEvents(b *testing.B) {
	c, _ := newCollector(b)
	scenario.BenchEvents(b, c)
}
