// Package kafkatest runs a fake Kafka cluster (franz-go's kfake) inside the
// process, on loopback ports, for tests and examples of package kafka: it
// starts in a few milliseconds, creates topics, produces records and closes
// with its goroutines.
//
// A kfake cluster keeps everything in memory and speaks the Kafka protocol
// well enough for consumer groups, commits and rebalances; it is not a
// broker to measure Kafka's own limits with. Point package kafka at a real
// cluster for that (see docs/scale-out.md).
package kafkatest
