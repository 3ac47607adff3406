package otelmetrics_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/otelmetrics"
)

func TestNewRefusesInvalidArguments(t *testing.T) {
	_, err := otelmetrics.New(nil)
	require.ErrorIs(t, err, otelmetrics.ErrInvalidArgument)
	require.ErrorContains(t, err, "otelmetrics: ")

	provider := newSDK().provider
	for name, opt := range map[string]otelmetrics.Option{
		"empty namespace":      otelmetrics.WithNamespace(""),
		"namespace with space": otelmetrics.WithNamespace("my app"),
		"digit first":          otelmetrics.WithNamespace("1app"),
		"long namespace":       otelmetrics.WithNamespace(strings.Repeat("a", 202)),
		"no buckets":           otelmetrics.WithQueueWaitBuckets(),
		"decreasing buckets":   otelmetrics.WithHandlingBuckets(1, 0.5),
		"equal buckets":        otelmetrics.WithHandlingBuckets(1, 1),
		"NaN bucket":           otelmetrics.WithQueueWaitBuckets(math.NaN()),
		"infinite bucket":      otelmetrics.WithHandlingBuckets(1, math.Inf(1)),
	} {
		_, err := otelmetrics.New(provider, opt)
		require.ErrorIs(t, err, otelmetrics.ErrInvalidOption, name)
		require.True(t, strings.HasPrefix(err.Error(), "otelmetrics: invalid option: "), err.Error())
	}
	_, err = otelmetrics.New(provider, nil, otelmetrics.WithNamespace("my-app/v1.x_y"))
	require.NoError(t, err, "a nil option is ignored; '-', '/', '.' and '_' are allowed")
}

// histogramBounds returns the bounds of each histogram after some events.
func histogramBounds(t *testing.T, opts ...otelmetrics.Option) map[string][]float64 {
	obs, s := newObserver(t, opts...)
	scenario.Apply(obs, scenario.AllEvents())
	bounds := map[string][]float64{}
	for _, m := range s.metrics(t) {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			bounds[m.Name] = h.DataPoints[0].Bounds
		}
	}
	return bounds
}

// The buckets given are the histograms' bounds, and a copy: changing the
// slice afterwards changes nothing. Without them, DefaultBuckets.
func TestBucketsOptions(t *testing.T) {
	wait, handling := []float64{0.001, 0.01}, []float64{0.5, 1, 2}
	opts := []otelmetrics.Option{otelmetrics.WithQueueWaitBuckets(wait...), otelmetrics.WithHandlingBuckets(handling...)}
	wait[0], handling[0] = 9, 9
	require.Equal(t, map[string][]float64{
		"aggflow.exchange.queue_wait": {0.001, 0.01},
		"aggflow.exchange.handling":   {0.5, 1, 2},
	}, histogramBounds(t, opts...))
	def := otelmetrics.DefaultBuckets()
	require.Len(t, def, 19)
	require.Equal(t, map[string][]float64{"aggflow.exchange.queue_wait": def, "aggflow.exchange.handling": def},
		histogramBounds(t))
}

// Without an SDK (the no-op provider) every method is a cheap no-op.
func TestNoopProvider(t *testing.T) {
	obs, err := otelmetrics.New(noop.NewMeterProvider())
	require.NoError(t, err)
	scenario.Apply(obs, scenario.AllEvents())
	reg, err := obs.Register(scenario.Fake{ID: "d"})
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
}

// Every namespace WithNamespace accepts makes instruments the SDK accepts:
// New fails with ErrInvalidOption or not at all, never with ErrMeter.
func FuzzNamespace(f *testing.F) {
	for _, ns := range []string{"aggflow", "a", "my-app/v1.x_y", "", "1a", "a b", "é", strings.Repeat("a", 201)} {
		f.Add(ns)
	}
	provider := newSDK().provider
	f.Fuzz(func(t *testing.T, ns string) {
		_, err := otelmetrics.New(provider, otelmetrics.WithNamespace(ns))
		if err != nil && !errors.Is(err, otelmetrics.ErrInvalidOption) {
			t.Fatalf("namespace %q: %v", ns, err)
		}
	})
}
