// Package jetstream binds aggflow to NATS JetStream for scale-out.
package jetstream
