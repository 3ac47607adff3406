package otelmetrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/observe/internal/adapter"
	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/otelmetrics"
)

// The tests every adapter passes, on the SDK with a ManualReader.
func TestSuite(t *testing.T) {
	scenario.Suite(t, scenario.Adapter{
		New: func(t require.TestingT, bounds []float64) scenario.Instance {
			var opts []otelmetrics.Option
			if bounds != nil {
				opts = append(opts, otelmetrics.WithHandlingBuckets(bounds...))
			}
			obs, s := newObserver(t, opts...)
			return scenario.Instance{
				Observer: obs,
				Register: func(d adapter.Dispatcher) (func() error, error) {
					reg, err := obs.Register(d)
					if err != nil {
						return nil, err
					}
					return reg.Unregister, nil
				},
				Collect: func(t require.TestingT) (scenario.Got, error) { return s.collect(t, otelmetrics.DefaultNamespace) },
			}
		},
		ErrInvalidArgument: otelmetrics.ErrInvalidArgument,
		ErrDuplicate:       otelmetrics.ErrDuplicate,
		Prefix:             "otelmetrics: ",
	})
}

// The instruments have the documented names and units.
func TestInstruments(t *testing.T) {
	obs, s := newObserver(t, otelmetrics.WithNamespace("shop"))
	_, err := obs.Register(scenario.Fake{ID: "d", Values: adapter.Gauges{Limit: 8}})
	require.NoError(t, err)
	scenario.Apply(obs, scenario.AllEvents())
	units := map[string]string{}
	for _, m := range s.metrics(t) {
		units[m.Name] = m.Unit
	}
	require.Equal(t, map[string]string{
		"shop.exchanges":           "{exchange}",
		"shop.exchange.queue_wait": "s",
		"shop.exchange.handling":   "s",
		"shop.exchanges.in_flight": "{exchange}",
		"shop.budget.pending":      "{exchange}",
		"shop.budget.limit":        "{exchange}",
	}, units)
}

// Unregister is idempotent.
func TestUnregisterTwice(t *testing.T) {
	obs, s := newObserver(t)
	reg, err := obs.Register(scenario.Fake{ID: "d"})
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
	require.NoError(t, reg.Unregister())
	require.Empty(t, s.mustCollect(t).Gauges)
}
