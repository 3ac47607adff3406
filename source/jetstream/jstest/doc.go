// Package jstest runs a NATS server with JetStream inside the calling
// process: the default for development, tests, examples and the flights job,
// so that they run anywhere without a broker to install. It listens on a free
// loopback port and keeps its store in a temporary directory that Shutdown
// removes.
//
// Production points the consumer at a real cluster instead (nats-server 2.15
// or later: the consumer resets its durable consumers to their ack floor with
// the consumer reset API); nothing else changes.
//
// Cost: a Start and a Shutdown take 3 to 5 ms together (BenchmarkStartShutdown,
// on the project's 2-core machine) and the server runs tens of goroutines,
// all joined by Shutdown.
package jstest
