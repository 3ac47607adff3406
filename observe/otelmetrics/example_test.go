package otelmetrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/observe/otelmetrics"
)

var (
	carts    = aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Cart"}
	payments = aggregate.MaterializedNamedAggregate{Context: "shop", Aggregate: "Payment"}
)

// command is addressed to one cart or payment; fail makes its handler
// return an error.
type command struct {
	to   aggregate.ID
	fail bool
}

func (c command) AggregateID() aggregate.ID { return c.to }

func commands() flux.Flux[command] {
	return flux.FromSlice([]command{
		{to: aggregate.NewID(carts, "c1")}, {to: aggregate.NewID(payments, "p1")},
		{to: aggregate.NewID(carts, "c2"), fail: true}, {to: aggregate.NewID(carts, "c1")},
		{to: aggregate.NewID(payments, "p1"), fail: true},
	})
}

// runShop runs a MainDispatcher of carts and payments observed by obs to
// its end, registered with the gauges while it runs.
func runShop(obs *otelmetrics.Observer) {
	supplier, err := aggregate.NewSchedulerSupplier("shop")
	if err != nil {
		panic(err)
	}
	m, err := dispatch.NewMain("shop", []aggregate.NamedAggregate{carts, payments}, commands(),
		func(_ context.Context, c command) error {
			if c.fail {
				return fmt.Errorf("refused %v", c.to.ID)
			}
			return nil
		}, supplier, dispatch.WithObserver(obs), dispatch.WithMaxPending(100))
	if err != nil {
		panic(err)
	}
	reg, err := obs.Register(m)
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := reg.Unregister(); err != nil {
			panic(err)
		}
	}()
	ctx := context.Background()
	if err := m.Prepare(ctx); err != nil {
		panic(err)
	}
	if err := m.Start(); err != nil {
		panic(err)
	}
	<-m.Done()
	if err := supplier.StopGracefully(ctx); err != nil {
		panic(err)
	}
}

// points returns "name{attributes} value" for the points of the int64
// sums and the histograms' counts whose name contains part, sorted.
func points(reader *sdkmetric.ManualReader, part string) []string {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	line := func(name string, attrs attribute.Set, v any) {
		if strings.Contains(name, part) {
			lines = append(lines, fmt.Sprintf("%s{%s} %v", name, attrs.Encoded(attribute.DefaultEncoder()), v))
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					line(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					line(m.Name+".count", p.Attributes, p.Count)
				}
			}
		}
	}
	slices.Sort(lines)
	return lines
}

// An Observer on an OpenTelemetry SDK (a ManualReader here; an OTLP or
// Prometheus exporter in production) counts the exchanges of a
// MainDispatcher's children by outcome, and times them.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	obs, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		panic(err)
	}
	runShop(obs)
	for _, p := range points(reader, "exchange") {
		fmt.Println(p)
	}
	// Output:
	// aggflow.exchange.handling.count{aggregate=Cart,context=shop,dispatcher=shop-Cart,outcome=error} 1
	// aggflow.exchange.handling.count{aggregate=Cart,context=shop,dispatcher=shop-Cart,outcome=success} 2
	// aggflow.exchange.handling.count{aggregate=Payment,context=shop,dispatcher=shop-Payment,outcome=error} 1
	// aggflow.exchange.handling.count{aggregate=Payment,context=shop,dispatcher=shop-Payment,outcome=success} 1
	// aggflow.exchange.queue_wait.count{aggregate=Cart,context=shop,dispatcher=shop-Cart} 3
	// aggflow.exchange.queue_wait.count{aggregate=Payment,context=shop,dispatcher=shop-Payment} 2
	// aggflow.exchanges{aggregate=Cart,context=shop,dispatcher=shop-Cart,outcome=error} 1
	// aggflow.exchanges{aggregate=Cart,context=shop,dispatcher=shop-Cart,outcome=success} 2
	// aggflow.exchanges{aggregate=Payment,context=shop,dispatcher=shop-Payment,outcome=error} 1
	// aggflow.exchanges{aggregate=Payment,context=shop,dispatcher=shop-Payment,outcome=success} 1
}

// Register makes the gauges read a dispatcher at each collection, until its
// Registration is unregistered.
func ExampleObserver_Register() {
	reader := sdkmetric.NewManualReader()
	obs, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		panic(err)
	}
	d, err := dispatch.New("carts", carts, commands(), // not started: its gauges read 0 in flight
		func(context.Context, command) error { return nil }, dispatch.WithMaxPending(10))
	if err != nil {
		panic(err)
	}
	reg, err := obs.Register(d)
	if err != nil {
		panic(err)
	}
	fmt.Println(points(reader, "budget"))
	if err := reg.Unregister(); err != nil {
		panic(err)
	}
	fmt.Println(points(reader, "budget"))
	// Output:
	// [aggflow.budget.limit{dispatcher=carts} 10 aggflow.budget.pending{dispatcher=carts} 0]
	// []
}
