// Package adapter holds what the metrics adapters (observe/otelmetrics,
// observe/prommetrics) share: the per-Labels cache that keeps the hot path
// free of allocations, the default histogram buckets and their validation,
// the set of dispatchers registered for gauges, and the panic-safe read of
// those gauges. It depends on the core module only, so the core never
// depends on a metrics library.
package adapter
