package scenario

import (
	"maps"
	"slices"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// LabelKeys are the only label keys an adapter may use.
var LabelKeys = []string{"aggregate", "context", "dispatcher", "outcome"}

// Check requires got to show exactly want: the same counts per label set,
// histograms of the right count, sum and buckets (handling over bounds),
// the queue-wait counts, the gauges, and labels of the known keys only,
// none of which carries an aggregate id.
func Check(t require.TestingT, want Want, got Got, bounds []float64) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Equal(t, want.Exchanges, got.Exchanges, "exchanges by label set")
	require.ElementsMatch(t, slices.Collect(maps.Keys(want.Handling)), slices.Collect(maps.Keys(got.Handling)),
		"handling label sets")
	for k, values := range want.Handling {
		w, g := Summarise(values, bounds), got.Handling[k]
		require.Equal(t, w.Count, g.Count, "handling count of %+v", k)
		require.Equal(t, w.Counts, g.Counts, "handling buckets of %+v", k)
		require.InDelta(t, w.Sum, g.Sum, 1e-9*float64(w.Count+1), "handling sum of %+v", k)
	}
	wait := map[Key]uint64{}
	for k, n := range want.QueueWait {
		wait[k] = uint64(n)
	}
	require.Equal(t, wait, got.QueueWait, "queue wait counts by label set")
	require.Equal(t, want.Gauges, got.Gauges, "gauges by dispatcher")
	CheckLabels(t, want.IDs, got.Labels)
}

// CheckLabels requires labels to use LabelKeys only and no value to be one
// of ids.
func CheckLabels(t require.TestingT, ids []string, labels map[string][]string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Subset(t, LabelKeys, slices.Collect(maps.Keys(labels)), "label keys")
	for key, values := range labels {
		for _, v := range values {
			require.NotContains(t, ids, v, "label %q carries an aggregate id", key)
		}
	}
}

// GaugesOf returns the gauges of d as they are now.
func GaugesOf(t require.TestingT, d adapter.Dispatcher) adapter.Gauges {
	g, err := adapter.Read(d)
	require.NoError(t, err)
	return g
}
