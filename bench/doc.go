// Package bench is the streaming benchmark suite: one workload, several
// implementations of "handle each group's exchanges one at a time, in order,
// groups concurrently", measured side by side in one run so that results are
// read as ratios.
//
// The workload is Reactor's (../shared/baselines/reactor/ReactorBench.java):
// K ids "account-0".."account-(K-1)", a stream of N ids drawn uniformly with
// Java's SplittableRandom seeded with K (ported here, so the Go and JVM runs
// see the same sequence), group key = aggregate.GroupKey(id, P), each id
// hashed once (an aggregate.Key), as a JVM String keeps its hash. A producer
// streams the N exchanges without pauses (or, for latency runs, at a paced
// rate); every implementation handles them and returns when all are handled.
//
// Implementations (Impls): inline (the producer calls the handler: the floor
// of the work), spsc (one lock-free single-producer single-consumer ring per
// consumer goroutine: the floor of a hand-off), sharded (P goroutines with a
// buffered channel each), rxgo (rxgo v2.5.0 GroupBy), aggflow (the library's
// dispatcher, in aggflow.go alone, routing by the exchange's key; aggflow-id
// by its AggregateID, hashing it at every exchange) and reactor
// (ReactorBench on the JVM, as a subprocess).
//
// The command in cmd/streaming runs every (implementation, cell, repetition)
// in a process of its own, so that peak RSS is per run, and writes a Markdown
// report and charts. BenchmarkStreaming runs the same implementations in
// process for go test -bench.
package bench
