// Package kafka binds aggflow to Kafka consumer groups with franz-go.
package kafka
