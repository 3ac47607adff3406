package otelmetrics_test

import (
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/otelmetrics"
)

// BenchmarkDispatch is the cost per exchange of a dispatcher with the
// Observer on the SDK (a ManualReader, never collected during the run) and
// on the no-op provider, against the same dispatcher without an Observer
// and with one that does nothing (what observing costs the dispatcher).
func BenchmarkDispatch(b *testing.B) {
	b.Run("observer=none", func(b *testing.B) { scenario.BenchDispatch(b, nil) })
	b.Run("observer=nop", func(b *testing.B) { scenario.BenchDispatch(b, scenario.Nop{}) })
	b.Run("observer=otel-sdk", func(b *testing.B) {
		obs, _ := newObserver(b)
		scenario.BenchDispatch(b, obs)
	})
	b.Run("observer=otel-noop", func(b *testing.B) { scenario.BenchDispatch(b, noopObserver(b)) })
}

// BenchmarkEvents is the Observer's own cost for one exchange's events.
func BenchmarkEvents(b *testing.B) {
	b.Run("provider=sdk", func(b *testing.B) {
		obs, _ := newObserver(b)
		scenario.BenchEvents(b, obs)
	})
	b.Run("provider=noop", func(b *testing.B) { scenario.BenchEvents(b, noopObserver(b)) })
}

func noopObserver(b *testing.B) dispatch.Observer {
	obs, err := otelmetrics.New(noop.NewMeterProvider())
	if err != nil {
		b.Fatal(err)
	}
	return obs
}
