package kafka

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
)

// Headers of a dead letter, besides the original record's: where it comes
// from, why and after how many attempts (the JetStream binding's dead
// letters carry the same error and attempts headers).
const (
	DeadLetterTopicHeader     = "Aggflow-Source-Topic"
	DeadLetterPartitionHeader = "Aggflow-Source-Partition"
	DeadLetterOffsetHeader    = "Aggflow-Source-Offset"
	DeadLetterErrorHeader     = "Aggflow-Error"
	DeadLetterAttemptsHeader  = "Aggflow-Attempts"
)

// WithFailurePolicy sets what becomes of a record whose handler failed
// (returned an error or panicked): by default it is settled, committed
// past with a WARN line (at most one per partition a second) and counted
// in Stats.Failures. See partition.FailurePolicy: retries in place hold the
// record's group (and the aggregates that share it) and keep the
// partition's commits below it until it ends.
//
// partition.DeadLetter(topic) produces the record to topic, which must
// exist and differ from the subscription's, through the consumer's client
// (a produce the broker acknowledged, each bounded by the commit timeout):
// its key, value and headers, DeadLetterTopicHeader,
// DeadLetterPartitionHeader and DeadLetterOffsetHeader naming the source,
// DeadLetterErrorHeader the last error and DeadLetterAttemptsHeader the
// attempt; only then is its offset committed past. With it the consumer
// keeps each delivered record (key, value, headers) until its partition's
// commit passes it: memory of about the pending records' size.
// partition.Stop() fails the consumer (Err wraps partition.ErrHandlerFailed),
// committing what came before the record in its partition.
//
// An invalid policy, or a dead-letter topic that is the subscription's or
// no valid topic name, makes NewConsumer return ErrInvalidArgument.
func WithFailurePolicy(p partition.FailurePolicy) Option {
	return func(c *config) {
		f := &failing{policy: p}
		c.failing = f
		c.partition = append(c.partition, partition.WithFailurePolicy(p),
			partition.WithFailureActions(partition.FailureActions{
				DeadLetter: func(ctx context.Context, l partition.Letter) error { return f.c.deadLetter(ctx, l) },
				Stop:       func(err error) { f.c.fail(err) },
			}))
	}
}

// topicName is what Kafka accepts as a topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// failing is one consumer's failure policy: its actions call the consumer
// that bind gave it, before any handler runs.
type failing struct {
	policy partition.FailurePolicy
	c      failer
}

// failer is what a failure policy's actions call: the Consumer.
type failer interface {
	deadLetter(ctx context.Context, l partition.Letter) error
	fail(err error)
}

// bind checks the dead-letter topic against the subscription's topic
// (partitions) and gives the policy c, the consumer named name; without a
// policy (nil) it does nothing.
func (f *failing) bind(c failer, name, partitions string) error {
	if f == nil {
		return nil
	}
	if to := f.policy.DeadLetterTo(); to != "" && (to == partitions || !topicName.MatchString(to) || to == "." || to == "..") {
		return fmt.Errorf("%w: consumer %q: dead-letter topic %q is the subscription's or no topic name", ErrInvalidArgument, name, to)
	}
	f.c = c
	return nil
}

// deadLetter produces the letter's record to the dead-letter topic and
// waits for the broker's acknowledgement.
func (c *Consumer[T]) deadLetter(ctx context.Context, l partition.Letter) error {
	r := c.kept.find(l.Partition, l.Position)
	if r == nil {
		return fmt.Errorf("kafka: consumer %q: partition %d offset %d: the record is not kept", c.name, l.Partition, l.Position)
	}
	hs := append(make([]kgo.RecordHeader, 0, len(r.Headers)+5), r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: DeadLetterTopicHeader, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: DeadLetterPartitionHeader, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: DeadLetterOffsetHeader, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: DeadLetterErrorHeader, Value: []byte(l.Err.Error())},
		kgo.RecordHeader{Key: DeadLetterAttemptsHeader, Value: strconv.AppendInt(nil, int64(l.Attempt), 10)})
	ctx, cancel := context.WithTimeout(ctx, c.cfg.commitTimeout)
	defer cancel()
	c.mu.Lock()
	cl := c.cl
	c.mu.Unlock()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: l.To, Key: r.Key, Value: r.Value, Headers: hs}).FirstErr()
	if err != nil {
		return fmt.Errorf("kafka: consumer %q: producing partition %d offset %d to %q: %w", c.name, l.Partition, l.Position, l.To, err)
	}
	return nil
}

// keep keeps r, delivered to o, for its dead letter when the policy
// publishes them, forgetting the records of o finished already. When r
// begins its partition's records (a new assignment), those of the
// partitions no longer owned are forgotten too.
func (c *Consumer[T]) keep(o *owned[T], r *kgo.Record) {
	if f := c.cfg.failing; f != nil && f.policy.DeadLetterTo() != "" {
		prefix, ok := o.in.Prefix()
		if c.kept.push(r, prefix, ok) {
			c.kept.retain(c.disp.Owned())
		}
	}
}

// keptRecords are the records delivered and not yet committed past, per
// partition, in offset order: the poll loop pushes, a dead letter finds.
type keptRecords struct {
	mu sync.Mutex
	by map[int32][]*kgo.Record
}

// push keeps r; first says it begins its partition's records.
func (k *keptRecords) push(r *kgo.Record, prefix int64, ok bool) (first bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[int32][]*kgo.Record{}
	}
	rs, kept := k.by[r.Partition]
	if n := len(rs); n > 0 && rs[n-1].Offset >= r.Offset {
		clear(rs)
		rs, kept = rs[:0], false // read again from an earlier offset: a new assignment
	}
	drop := 0
	for ok && drop < len(rs) && rs[drop].Offset <= prefix {
		drop++
	}
	clear(rs[:drop]) // the array is reallocated at the live length when full
	k.by[r.Partition] = append(rs[drop:], r)
	return !kept
}

// retain forgets the records of the partitions not in owned.
func (k *keptRecords) retain(owned []int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for p := range k.by {
		if !slices.Contains(owned, p) {
			delete(k.by, p)
		}
	}
}

func (k *keptRecords) find(p int32, offset int64) *kgo.Record {
	k.mu.Lock()
	defer k.mu.Unlock()
	rs := k.by[p]
	i, found := slices.BinarySearchFunc(rs, offset, func(r *kgo.Record, o int64) int { return cmp.Compare(r.Offset, o) })
	if !found {
		return nil
	}
	return rs[i]
}
