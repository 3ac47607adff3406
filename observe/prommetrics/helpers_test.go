package prommetrics_test

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/prommetrics"
)

// newCollector returns a Collector registered with a new pedantic registry
// (which checks every metric against its descriptor when gathering).
func newCollector(t require.TestingT, opts ...prommetrics.Option) (*prommetrics.Collector, *prometheus.Registry) {
	c, err := prommetrics.New(opts...)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return c, reg
}

// gather reads the metrics (namespace ns) into the model's terms, and
// returns Gather's error.
func gather(t require.TestingT, reg prometheus.Gatherer, ns string) (scenario.Got, error) {
	families, err := reg.Gather()
	got := scenario.NewGot()
	for _, f := range families {
		name, ok := strings.CutPrefix(f.GetName(), ns+"_")
		require.True(t, ok, "metric %q outside the namespace", f.GetName())
		for _, m := range f.GetMetric() {
			read(t, &got, name, m)
		}
	}
	return got, err
}

// mustGather is gather with no error.
func mustGather(t require.TestingT, reg prometheus.Gatherer) scenario.Got {
	got, err := gather(t, reg, prommetrics.DefaultNamespace)
	require.NoError(t, err)
	return got
}

func read(t require.TestingT, got *scenario.Got, name string, m *dto.Metric) {
	k := key(got, m.GetLabel())
	switch name {
	case "exchanges_total":
		got.Exchanges[k] += int64(m.GetCounter().GetValue())
	case "exchange_handling_seconds":
		got.Handling[k] = histogram(m.GetHistogram())
	case "exchange_queue_wait_seconds":
		got.QueueWait[k] = m.GetHistogram().GetSampleCount()
	case "exchanges_in_flight", "budget_pending", "budget_limit":
		require.Equal(t, scenario.Key{Dispatcher: k.Dispatcher}, k, "gauges are by dispatcher only")
		got.Gauge(t, k.Dispatcher, name, int64(m.GetGauge().GetValue()))
	default:
		require.Fail(t, "unexpected metric", name)
	}
}

// histogram turns Prometheus' cumulative buckets into the model's
// per-bucket counts, the +Inf bucket last.
func histogram(h *dto.Histogram) scenario.Histogram {
	out := scenario.Histogram{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
	var below uint64
	for _, b := range h.GetBucket() {
		out.Counts = append(out.Counts, b.GetCumulativeCount()-below)
		below = b.GetCumulativeCount()
	}
	out.Counts = append(out.Counts, h.GetSampleCount()-below)
	return out
}

// key returns the model's label set of labels, recording every label.
func key(got *scenario.Got, labels []*dto.LabelPair) scenario.Key {
	var k scenario.Key
	for _, p := range labels {
		got.Label(p.GetName(), p.GetValue())
		switch p.GetName() {
		case prommetrics.DispatcherLabel:
			k.Dispatcher = p.GetValue()
		case prommetrics.ContextLabel:
			k.Context = p.GetValue()
		case prommetrics.AggregateLabel:
			k.Aggregate = p.GetValue()
		case prommetrics.OutcomeLabel:
			k.Outcome = p.GetValue()
		}
	}
	return k
}
