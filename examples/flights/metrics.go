package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/observe/prommetrics"
)

// shutdownWithin bounds the metrics server's shutdown: a scrape still
// running by then has its connection closed.
const shutdownWithin = 5 * time.Second

// metricsServer is -metrics: a prommetrics Collector, registered with a
// registry of its own, served on /metrics over HTTP from its own goroutine
// until close.
type metricsServer struct {
	collector *prommetrics.Collector
	server    *http.Server
	addr      string     // where it listens, the port resolved
	served    chan error // Serve's result, once it returned
}

// serveMetrics listens on addr (host:port; port 0 picks one) and serves the
// Collector's metrics on /metrics. The caller must close it.
func serveMetrics(addr string) (*metricsServer, error) {
	collector, err := prommetrics.New()
	if err != nil {
		return nil, fmt.Errorf("flights: -metrics: %w", err)
	}
	registry := prometheus.NewRegistry()
	if err := registry.Register(collector); err != nil {
		return nil, fmt.Errorf("flights: -metrics: %w", err)
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("flights: -metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	m := &metricsServer{
		collector: collector,
		server:    &http.Server{Handler: mux, ReadHeaderTimeout: shutdownWithin},
		addr:      listener.Addr().String(),
		served:    make(chan error, 1),
	}
	go func() { m.served <- m.server.Serve(listener) }()
	return m, nil
}

// options observes the dispatcher with the Collector; none for a nil m
// (no -metrics).
func (m *metricsServer) options() []dispatch.Option[job.Departure] {
	if m == nil {
		return nil
	}
	return []dispatch.Option[job.Departure]{dispatch.WithObserver(m.collector)}
}

// register makes the Collector report d's gauges (in flight, budget) until
// the server closes; nothing for a nil m.
func (m *metricsServer) register(d *dispatch.Dispatcher[job.Departure]) error {
	if m == nil {
		return nil
	}
	if err := m.collector.Register(d); err != nil {
		return fmt.Errorf("-metrics: %w", err)
	}
	return nil
}

// close shuts the server down within shutdownWithin (then closes what is
// left) and returns once its goroutine has.
func (m *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWithin)
	defer cancel()
	err := m.server.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("flights: -metrics: shutdown: %w", err), m.server.Close())
	}
	if served := <-m.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("flights: -metrics: %w", served))
	}
	return err
}
