package prommetrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/observe/prommetrics"
)

var orders = aggregate.MaterializedNamedAggregate{Context: "sales", Aggregate: "Order"}

// order is an exchange addressed to one order; a negative amount is refused.
type order struct {
	id     aggregate.ID
	amount int
}

func (o order) AggregateID() aggregate.ID { return o.id }

func placeOrder(_ context.Context, o order) error {
	if o.amount < 0 {
		return errors.New("negative amount")
	}
	return nil
}

func someOrders() flux.Flux[order] {
	var os []order
	for i, amount := range []int{10, -5, 20, 30, -1, 40} {
		os = append(os, order{aggregate.NewID(orders, fmt.Sprint("order-", i%3)), amount})
	}
	return flux.FromSlice(os)
}

// run prepares and starts d, and waits until it handled everything.
func run(d *dispatch.Dispatcher[order]) {
	if err := d.Prepare(context.Background()); err != nil {
		panic(err)
	}
	if err := d.Start(); err != nil {
		panic(err)
	}
	<-d.Done()
}

// scrape GETs url and prints the lines of the exposition that start with
// one of prefixes.
func scrape(url string, prefixes ...string) {
	resp, err := http.Get(url)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(lines.Text(), p) {
				fmt.Println(lines.Text())
			}
		}
	}
	if err := lines.Err(); err != nil {
		panic(err)
	}
}

// A Collector registered with a Prometheus registry, served on /metrics by
// promhttp, counts a dispatcher's exchanges by outcome, times them, and
// reports its gauges.
func ExampleNew() {
	metrics, err := prommetrics.New()
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	d, err := dispatch.New("orders", orders, someOrders(), placeOrder,
		dispatch.WithObserver(metrics), dispatch.WithMaxPending(100))
	if err != nil {
		panic(err)
	}
	if err := metrics.Register(d); err != nil {
		panic(err)
	}
	run(d)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	server := httptest.NewServer(mux)
	defer server.Close()
	scrape(server.URL+"/metrics", "aggflow_exchanges_total", "aggflow_budget", "aggflow_exchanges_in_flight",
		"aggflow_exchange_handling_seconds_count", "aggflow_exchange_queue_wait_seconds_count")
	// Output:
	// aggflow_budget_limit{dispatcher="orders"} 100
	// aggflow_budget_pending{dispatcher="orders"} 0
	// aggflow_exchange_handling_seconds_count{aggregate="Order",context="sales",dispatcher="orders",outcome="error"} 2
	// aggflow_exchange_handling_seconds_count{aggregate="Order",context="sales",dispatcher="orders",outcome="success"} 4
	// aggflow_exchange_queue_wait_seconds_count{aggregate="Order",context="sales",dispatcher="orders"} 6
	// aggflow_exchanges_in_flight{dispatcher="orders"} 0
	// aggflow_exchanges_total{aggregate="Order",context="sales",dispatcher="orders",outcome="error"} 2
	// aggflow_exchanges_total{aggregate="Order",context="sales",dispatcher="orders",outcome="success"} 4
}

// Unregister stops the gauges of a dispatcher; its counters stay.
func ExampleCollector_Unregister() {
	metrics, err := prommetrics.New()
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	d, err := dispatch.New("orders", orders, someOrders(), placeOrder, dispatch.WithObserver(metrics))
	if err != nil {
		panic(err)
	}
	if err := metrics.Register(d); err != nil {
		panic(err)
	}
	run(d)
	fmt.Println("unregistered:", metrics.Unregister(d))
	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		fmt.Println(f.GetName(), len(f.GetMetric()))
	}
	// Output:
	// unregistered: true
	// aggflow_exchange_handling_seconds 2
	// aggflow_exchange_queue_wait_seconds 1
	// aggflow_exchanges_total 2
}
