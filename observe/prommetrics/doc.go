// Package prommetrics exports the metrics of aggflow's dispatchers to
// Prometheus: a Collector (a dispatch.Observer and a prometheus.Collector)
// counts exchanges by outcome and records their queue wait and handling
// time, and reads, when collected, the in-flight count and the pending
// budget of the dispatchers given to Register.
//
//	metrics, err := prommetrics.New()
//	registry.MustRegister(metrics)
//	d, err := dispatch.New(name, named, source, handler, dispatch.WithObserver(metrics))
//	err = metrics.Register(d)
//
// Labels have a bounded number of values: the dispatcher's name, the named
// aggregate's context and aggregate, and the outcome; never the aggregate
// id nor the group. The package is in the module observe, so aggflow's core
// module does not depend on the Prometheus client. docs/observability.md
// has the whole picture: names, labels, costs, and the OpenTelemetry
// adapter beside this one.
package prommetrics
