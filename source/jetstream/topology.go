package jetstream

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/aggregate"
)

// KeyHeader is the message header that carries the aggregate id, the key of
// its order: the consumer reads it before decoding, and a message without it
// is rejected with ErrMissingKey.
const KeyHeader = "Aggflow-Key"

// Topology is how exchanges are laid out on JetStream: one stream whose N
// subjects <Prefix>.0 ... <Prefix>.<N-1> are the partitions. A producer
// publishes an exchange of aggregate id to the subject of PartitionOf(id),
// so every exchange of an aggregate is in one partition, in publication
// order; a consumer owns partitions, each read by one durable consumer
// filtered on its subject.
type Topology struct {
	Stream     string // the stream's name
	Prefix     string // the subjects' prefix, a valid subject without wildcards
	Partitions int    // N, at least 1
}

func (t Topology) validate() error {
	switch {
	case t.Stream == "" || strings.ContainsAny(t.Stream, ">*. /\\\t\r\n"):
		return fmt.Errorf("%w: stream name %q", ErrInvalidArgument, t.Stream)
	case t.Prefix == "" || strings.ContainsAny(t.Prefix, ">* \t\r\n") ||
		strings.HasPrefix(t.Prefix, ".") || strings.HasSuffix(t.Prefix, "."):
		return fmt.Errorf("%w: subject prefix %q", ErrInvalidArgument, t.Prefix)
	case t.Partitions < 1:
		return fmt.Errorf("%w: %d partitions", ErrInvalidArgument, t.Partitions)
	}
	return nil
}

// Subject returns partition p's subject, <Prefix>.<p>.
func (t Topology) Subject(p int32) string {
	return t.Prefix + "." + strconv.Itoa(int(p))
}

// Subjects returns the N subjects of the stream, by partition.
func (t Topology) Subjects() []string {
	subjects := make([]string, t.Partitions)
	for p := range subjects {
		subjects[p] = t.Subject(int32(p))
	}
	return subjects
}

// PartitionOf returns the partition of aggregate id: aggregate.GroupKey(id,
// N), the hash aggflow groups by in one process (aggregate.HashCode, which
// its doc specifies), so a producer in another language computes it too. Inside a partition the
// consumer groups by partition.GroupKey, independent of this one.
func (t Topology) PartitionOf(id string) int32 {
	return int32(aggregate.GroupKey(id, t.Partitions))
}

// StreamConfig returns the configuration of the topology's stream: its
// name and its N subjects; set retention, limits and replicas on the copy.
// Creating the stream is the deployment's business (or a test's).
func (t Topology) StreamConfig() (natsjs.StreamConfig, error) {
	if err := t.validate(); err != nil {
		return natsjs.StreamConfig{}, err
	}
	return natsjs.StreamConfig{Name: t.Stream, Subjects: t.Subjects()}, nil
}

// NewMsg returns the message that carries data for aggregate id: on the
// subject of id's partition, with id in KeyHeader. Publish it with
// JetStream's Publish, PublishMsg or PublishMsgAsync. It allocates the
// message and its header. An empty id makes a message the consumer rejects
// (ErrMissingKey): it names no aggregate.
func (t Topology) NewMsg(id string, data []byte) *nats.Msg {
	m := nats.NewMsg(t.Subject(t.PartitionOf(id)))
	m.Header.Set(KeyHeader, id)
	m.Data = data
	return m
}
