package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// brokerSummary is what the summary says of the run through JetStream.
type brokerSummary struct {
	Partitions int           `json:"partitions"`
	Consumers  int           `json:"consumer_processes"`
	Assignment string        `json:"assignment"` // static or dynamic (-assign)
	Publish    time.Duration `json:"publish_ns"` // both halves under -assign dynamic
	Acks       int64         `json:"acks"`
	// Replayed and Duplicates sum the members'.
	Replayed   int64 `json:"replayed"`
	Duplicates int64 `json:"duplicates"`
	// -assign dynamic: the lease TTL; the time from the second member's
	// go-ahead until it held its share; the members.
	LeaseTTL time.Duration   `json:"lease_ttl_ns,omitempty"`
	Handoff  time.Duration   `json:"handoff_ns,omitempty"`
	Members  []memberSummary `json:"members,omitempty"`
}

// memberSummary is one member of -assign dynamic: the partitions it held
// when the stop began, its claims and releases seen in the lease bucket
// (the consumer's Stats do not count them), and its consumerReport's
// counters.
type memberSummary struct {
	Name        string  `json:"name"`
	Partitions  []int32 `json:"partitions"`
	Claims      int     `json:"claims"`
	Releases    int     `json:"releases"`
	Applied     int64   `json:"applied"`
	Adopted     int64   `json:"adopted"`
	Replayed    int64   `json:"replayed"`
	Redelivered int64   `json:"redelivered"`
	Duplicates  int64   `json:"duplicates"`
}

// sourceLine says how the flights came: the summary's source line.
func (b *brokerSummary) sourceLine() string {
	return fmt.Sprintf("jetstream (embedded nats-server, %s, published in %.3f s, consumed by %d processes), outcomes from the consumers' Stats, %s",
		job.Count(int64(b.Partitions), "partition"), b.Publish.Seconds(), b.Consumers,
		job.Count(b.Acks, "cumulative acknowledgement"))
}

// lines are the summary's lines of the assignment and of each member.
func (b *brokerSummary) lines() []job.Line {
	lines := []job.Line{{Label: "assignment", Text: b.assignmentLine()}}
	for _, m := range b.Members {
		lines = append(lines, job.Line{Label: "member " + m.Name, Text: m.line()})
	}
	return lines
}

// assignmentLine says how the consumer processes shared the partitions,
// and what they received twice.
func (b *brokerSummary) assignmentLine() string {
	twice := fmt.Sprintf("%s skipped, %s dropped", job.Count(b.Replayed, "replay"), job.Count(b.Duplicates, "duplicate"))
	if len(b.Members) == 0 {
		return fmt.Sprintf("%s: each process told its partitions (%s); %s", b.Assignment, strings.Join(consumerOwns, " and "), twice)
	}
	names := make([]string, len(b.Members))
	for i, m := range b.Members {
		names[i] = m.Name
	}
	members := fmt.Sprintf("%s: members %s, leases of %v", b.Assignment, strings.Join(names, " and "), b.LeaseTTL)
	if b.Handoff == 0 { // stopped (a signal, a failure) before the second member held its share
		return fmt.Sprintf("%s; stopped before the handoff: the second never held its share, and only the first half of the flights was published; %s",
			members, twice)
	}
	return fmt.Sprintf("%s; the second started once the first held all %d partitions, and held its share %.3f s later; "+
		"half the flights published before, half after; %s", members, b.Partitions, b.Handoff.Seconds(), twice)
}

// line says what member m held and did.
func (m memberSummary) line() string {
	ps := make([]string, len(m.Partitions))
	for i, p := range m.Partitions {
		ps[i] = strconv.Itoa(int(p))
	}
	held := "no partition"
	if len(ps) > 0 {
		held = "partitions " + strings.Join(ps, ",")
	}
	return fmt.Sprintf("%s at the end; %s, %s (lease bucket); %s applied, %s taken over; %s skipped, %s redelivered, %s dropped",
		held, job.Count(int64(m.Claims), "claim"), job.Count(int64(m.Releases), "release"), job.Count(m.Applied, "flight"),
		job.Count(m.Adopted, "airport state"), job.Count(m.Replayed, "replay"), job.Thousands(m.Redelivered), job.Count(m.Duplicates, "duplicate"))
}
