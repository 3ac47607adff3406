package otelmetrics_test

import (
	"context"
	"strings"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/otelmetrics"
)

// sdk is an OpenTelemetry SDK whose metrics are read on demand.
type sdk struct {
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
}

func newSDK() sdk {
	r := sdkmetric.NewManualReader()
	return sdk{reader: r, provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// newObserver returns an Observer on a fresh SDK.
func newObserver(t require.TestingT, opts ...otelmetrics.Option) (*otelmetrics.Observer, sdk) {
	s := newSDK()
	obs, err := otelmetrics.New(s.provider, opts...)
	require.NoError(t, err)
	return obs, s
}

// collect reads the metrics (namespace ns) into the model's terms, and
// returns the collection's error (a callback's).
func (s sdk) collect(t require.TestingT, ns string) (scenario.Got, error) {
	var rm metricdata.ResourceMetrics
	err := s.reader.Collect(context.Background(), &rm)
	got := scenario.NewGot()
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otelmetrics.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			name, ok := strings.CutPrefix(m.Name, ns+".")
			require.True(t, ok, "metric %q outside the namespace", m.Name)
			read(t, &got, name, m.Data)
		}
	}
	return got, err
}

// mustCollect is collect with no error.
func (s sdk) mustCollect(t require.TestingT) scenario.Got {
	got, err := s.collect(t, otelmetrics.DefaultNamespace)
	require.NoError(t, err)
	return got
}

func read(t require.TestingT, got *scenario.Got, name string, data metricdata.Aggregation) {
	switch name {
	case "exchanges":
		for _, p := range data.(metricdata.Sum[int64]).DataPoints {
			got.Exchanges[key(got, p.Attributes)] += p.Value
		}
	case "exchange.handling":
		for _, p := range data.(metricdata.Histogram[float64]).DataPoints {
			got.Handling[key(got, p.Attributes)] = scenario.Histogram{Count: p.Count, Sum: p.Sum, Counts: p.BucketCounts}
		}
	case "exchange.queue_wait":
		for _, p := range data.(metricdata.Histogram[float64]).DataPoints {
			got.QueueWait[key(got, p.Attributes)] = p.Count
		}
	case "exchanges.in_flight", "budget.pending", "budget.limit":
		for _, p := range data.(metricdata.Sum[int64]).DataPoints {
			k := key(got, p.Attributes)
			require.Equal(t, scenario.Key{Dispatcher: k.Dispatcher}, k, "gauges are by dispatcher only")
			got.Gauge(t, k.Dispatcher, name, p.Value)
		}
	default:
		require.Fail(t, "unexpected metric", name)
	}
}

// key returns the model's label set of attrs, recording every attribute.
func key(got *scenario.Got, attrs attribute.Set) scenario.Key {
	var k scenario.Key
	for _, kv := range attrs.ToSlice() {
		v := kv.Value.AsString()
		got.Label(string(kv.Key), v)
		switch kv.Key {
		case otelmetrics.DispatcherKey:
			k.Dispatcher = v
		case otelmetrics.ContextKey:
			k.Context = v
		case otelmetrics.AggregateKey:
			k.Aggregate = v
		case otelmetrics.OutcomeKey:
			k.Outcome = v
		}
	}
	return k
}

// metrics collects and returns the metrics as the SDK gives them.
func (s sdk) metrics(t require.TestingT) []metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	var ms []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		ms = append(ms, sm.Metrics...)
	}
	return ms
}
