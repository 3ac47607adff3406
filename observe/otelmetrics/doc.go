// Package otelmetrics exports the metrics of aggflow's dispatchers through
// the OpenTelemetry metric API: an Observer (a dispatch.Observer) counts
// exchanges by outcome and records their queue wait and handling time, and
// reads, at collection, the in-flight count and the pending budget of the
// dispatchers given to Register.
//
//	obs, err := otelmetrics.New(provider)
//	d, err := dispatch.New(name, named, source, handler, dispatch.WithObserver(obs))
//	reg, err := obs.Register(d)
//	defer reg.Unregister()
//
// Labels have a bounded number of values: the dispatcher's name, the named
// aggregate's context and aggregate, and the outcome; never the aggregate
// id nor the group. The package is in the module observe, so aggflow's core
// module does not depend on OpenTelemetry; it needs the metric API only,
// and any SDK (or none: the no-op provider costs a lookup per event).
// docs/observability.md has the whole picture: names, labels, costs, and
// the Prometheus adapter beside this one.
package otelmetrics
