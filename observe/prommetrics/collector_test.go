package prommetrics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/observe/internal/adapter"
	"github.com/aggflow/aggflow/observe/internal/scenario"
	"github.com/aggflow/aggflow/observe/prommetrics"
)

// The tests every adapter passes, gathered by a pedantic registry.
func TestSuite(t *testing.T) {
	scenario.Suite(t, scenario.Adapter{
		New: func(t require.TestingT, bounds []float64) scenario.Instance {
			var opts []prommetrics.Option
			if bounds != nil {
				opts = append(opts, prommetrics.WithHandlingBuckets(bounds...))
			}
			c, reg := newCollector(t, opts...)
			return scenario.Instance{
				Observer: c,
				Register: func(d adapter.Dispatcher) (func() error, error) {
					if err := c.Register(d); err != nil {
						return nil, err
					}
					return func() error {
						if !c.Unregister(d) {
							return errors.New("not registered")
						}
						return nil
					}, nil
				},
				Collect: func(t require.TestingT) (scenario.Got, error) {
					return gather(t, reg, prommetrics.DefaultNamespace)
				},
			}
		},
		ErrInvalidArgument: prommetrics.ErrInvalidArgument,
		ErrDuplicate:       prommetrics.ErrDuplicate,
		Prefix:             "prommetrics: ",
	})
}

// The metrics have the documented names, types and help, and pass
// Prometheus' lint (naming conventions: units, _total).
func TestMetrics(t *testing.T) {
	c, reg := newCollector(t, prommetrics.WithNamespace("shop"))
	require.NoError(t, c.Register(scenario.Fake{ID: "d", Values: adapter.Gauges{InFlight: 2, Pending: 3, Limit: 8}}))
	scenario.Apply(c, scenario.AllEvents())
	families, err := reg.Gather()
	require.NoError(t, err)
	types := map[string]string{}
	for _, f := range families {
		types[f.GetName()] = f.GetType().String()
		require.NotEmpty(t, f.GetHelp())
	}
	require.Equal(t, map[string]string{
		"shop_exchanges_total":             "COUNTER",
		"shop_exchange_queue_wait_seconds": "HISTOGRAM",
		"shop_exchange_handling_seconds":   "HISTOGRAM",
		"shop_exchanges_in_flight":         "GAUGE",
		"shop_budget_pending":              "GAUGE",
		"shop_budget_limit":                "GAUGE",
	}, types)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shop_budget_limit Pending budget limit (dispatch.WithMaxPending).
# TYPE shop_budget_limit gauge
shop_budget_limit{dispatcher="d"} 8
# HELP shop_budget_pending Pending budget in use: exchanges admitted and not finished, and units taken ahead.
# TYPE shop_budget_pending gauge
shop_budget_pending{dispatcher="d"} 3
# HELP shop_exchanges_in_flight Exchanges received and not ended.
# TYPE shop_exchanges_in_flight gauge
shop_exchanges_in_flight{dispatcher="d"} 2
`), "shop_budget_limit", "shop_budget_pending", "shop_exchanges_in_flight"))
	require.Equal(t, 4*5, testutil.CollectAndCount(c, "shop_exchanges_total"),
		"one series per label set (4) and outcome (5)")
}

// Unregister is by name, and finds nothing the second time.
func TestUnregisterByName(t *testing.T) {
	c, reg := newCollector(t)
	require.NoError(t, c.Register(scenario.Fake{ID: "d"}))
	require.True(t, c.Unregister(scenario.Fake{ID: "d", Values: adapter.Gauges{Limit: 1}}))
	require.False(t, c.Unregister(scenario.Fake{ID: "d"}))
	require.False(t, c.Unregister(nil))
	require.False(t, c.Unregister(scenario.Fake{ID: "d", PanicIn: "Name"}))
	require.Empty(t, mustGather(t, reg).Gauges)
}

// A name that is not UTF-8 is refused (a label value must be); Labels that
// are not are made so, rather than making the client panic on the hot path.
func TestInvalidUTF8(t *testing.T) {
	c, reg := newCollector(t)
	require.ErrorIs(t, c.Register(scenario.Fake{ID: "bad\xff"}), prommetrics.ErrInvalidArgument)
	scenario.Apply(c, []scenario.Event{{Kind: scenario.Discarded, Labels: scenario.BadLabels}})
	require.Equal(t, map[scenario.Key]int64{{Dispatcher: "d\uFFFD", Context: "c\uFFFD", Aggregate: "a\uFFFD", Outcome: "discarded"}: 1},
		mustGather(t, reg).Exchanges)
}
