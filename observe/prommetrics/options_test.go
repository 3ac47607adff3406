package prommetrics_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/prommetrics"
)

func TestNewRefusesInvalidOptions(t *testing.T) {
	for name, opt := range map[string]prommetrics.Option{
		"empty namespace":     prommetrics.WithNamespace(""),
		"namespace with dot":  prommetrics.WithNamespace("my.app"),
		"namespace with dash": prommetrics.WithNamespace("my-app"),
		"namespace colon":     prommetrics.WithNamespace("my:app"),
		"digit first":         prommetrics.WithNamespace("1app"),
		"no buckets":          prommetrics.WithQueueWaitBuckets(),
		"decreasing buckets":  prommetrics.WithHandlingBuckets(1, 0.5),
		"equal buckets":       prommetrics.WithHandlingBuckets(1, 1),
		"NaN bucket":          prommetrics.WithQueueWaitBuckets(math.NaN()),
		"infinite bucket":     prommetrics.WithHandlingBuckets(1, math.Inf(1)),
	} {
		_, err := prommetrics.New(opt)
		require.ErrorIs(t, err, prommetrics.ErrInvalidOption, name)
		require.True(t, strings.HasPrefix(err.Error(), "prommetrics: invalid option: "), err.Error())
	}
	_, err := prommetrics.New(nil, prommetrics.WithNamespace("_my_app2"))
	require.NoError(t, err, "a nil option is ignored")
}

// histogramBounds returns the bounds of each histogram after some events.
func histogramBounds(t *testing.T, opts ...prommetrics.Option) map[string][]float64 {
	c, reg := newCollector(t, opts...)
	scenario.Apply(c, scenario.AllEvents())
	families, err := reg.Gather()
	require.NoError(t, err)
	bounds := map[string][]float64{}
	for _, f := range families {
		if h := f.GetMetric()[0].GetHistogram(); h != nil {
			for _, b := range h.GetBucket() {
				bounds[f.GetName()] = append(bounds[f.GetName()], b.GetUpperBound())
			}
		}
	}
	return bounds
}

// The buckets given are the histograms' bounds, and a copy: changing the
// slice afterwards changes nothing. Without them, DefaultBuckets.
func TestBucketsOptions(t *testing.T) {
	wait, handling := []float64{0.001, 0.01}, []float64{0.5, 1, 2}
	opts := []prommetrics.Option{prommetrics.WithQueueWaitBuckets(wait...), prommetrics.WithHandlingBuckets(handling...)}
	wait[0], handling[0] = 9, 9
	require.Equal(t, map[string][]float64{
		"aggflow_exchange_queue_wait_seconds": {0.001, 0.01},
		"aggflow_exchange_handling_seconds":   {0.5, 1, 2},
	}, histogramBounds(t, opts...))
	def := prommetrics.DefaultBuckets()
	require.Len(t, def, 19)
	require.Equal(t, map[string][]float64{"aggflow_exchange_queue_wait_seconds": def, "aggflow_exchange_handling_seconds": def},
		histogramBounds(t))
}

// A registry takes one Collector per namespace: its descriptors are checked.
func TestOneCollectorPerNamespace(t *testing.T) {
	_, reg := newCollector(t)
	again, err := prommetrics.New()
	require.NoError(t, err)
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, reg.Register(again), &already)
	other, err := prommetrics.New(prommetrics.WithNamespace("other"))
	require.NoError(t, err)
	require.NoError(t, reg.Register(other))
}

// Every namespace WithNamespace accepts makes metrics a registry accepts:
// New fails with ErrInvalidOption or not at all, and then registers.
func FuzzNamespace(f *testing.F) {
	for _, ns := range []string{"aggflow", "a", "_x9", "", "1a", "a b", "a.b", "é", "a:b"} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns string) {
		c, err := prommetrics.New(prommetrics.WithNamespace(ns))
		if err != nil {
			if !errors.Is(err, prommetrics.ErrInvalidOption) {
				t.Fatalf("namespace %q: %v", ns, err)
			}
			return
		}
		if err := prometheus.NewPedanticRegistry().Register(c); err != nil {
			t.Fatalf("namespace %q: %v", ns, err)
		}
	})
}
